/*
 * Preloaded into a daemon in the VM: VIDIOC_STREAMON fails with ENOSPC, the answer of a
 * USB host controller with no bandwidth left for a stream, while the file that
 * EDGESIGHT_TEST_NO_BANDWIDTH names exists. A real vivid camera then stands in for a
 * starved USB camera, and deleting the file lets it stream (tests/vm_capture/).
 *
 * The v4l crate makes its ioctls through syscall(SYS_ioctl, ...), not ioctl(): both are
 * taken.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/videodev2.h>

/* Whether this request is refused now. */
static int starved(unsigned long request)
{
    const char *flag = getenv("EDGESIGHT_TEST_NO_BANDWIDTH");
    return request == VIDIOC_STREAMON && flag && access(flag, F_OK) == 0;
}

int ioctl(int fd, unsigned long request, ...)
{
    static int (*real)(int, unsigned long, void *);
    va_list args;
    va_start(args, request);
    void *arg = va_arg(args, void *);
    va_end(args);
    if (starved(request)) {
        errno = ENOSPC;
        return -1;
    }
    if (!real)
        real = (int (*)(int, unsigned long, void *))dlsym(RTLD_NEXT, "ioctl");
    return real(fd, request, arg);
}

long syscall(long number, ...)
{
    static long (*real)(long, ...);
    long a[6];
    va_list args;
    va_start(args, number);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(args, long);
    va_end(args);
    if (number == SYS_ioctl && starved((unsigned long)a[1])) {
        errno = ENOSPC;
        return -1;
    }
    if (!real)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
