//! Memory held for rare uses, given back to the kernel between them.
//!
//! A live frame's check (`[opencl] verify_every`) copies the frame and its pictures into
//! buffers the camera keeps, so that its frame loop allocates nothing, and the reference
//! then works out the frame again on the verifier's thread. Both happen once a minute, yet
//! the copies stayed resident and malloc kept the reference's freed images for the next
//! check: together two fifths of a 1080p camera's anonymous memory. [`release`] hands a
//! buffer's pages back while keeping its allocation (the next copy faults them in again:
//! page faults, no allocation), and [`map_large_allocations`] has malloc give large
//! blocks back when they are freed.

/// Gives the whole pages of `buf`'s allocation back to the kernel, keeping the allocation
/// and the length: the bytes are unspecified (zero, as the kernel gives pages) until
/// written again. A refusal only leaves the pages resident.
pub fn release(buf: &mut Vec<u8>) {
    let page = page_size();
    let start = buf.as_mut_ptr() as usize;
    let (first, last) = (
        start.next_multiple_of(page),
        (start + buf.capacity()) / page * page,
    );
    if last <= first {
        return;
    }
    // SAFETY: [first, last) lies inside `buf`'s allocation (rounded inwards to whole
    // pages, so malloc's own words around it are untouched), which `&mut` lends to this
    // call alone. MADV_DONTNEED only changes what those bytes read as (zero for the
    // private anonymous memory malloc takes, the file's bytes otherwise), and any byte
    // value is a valid u8.
    unsafe {
        libc::madvise(
            first as *mut libc::c_void,
            last - first,
            libc::MADV_DONTNEED,
        );
    }
}

/// The size from which an allocation gets a mapping of its own.
pub const OWN_MAPPING: usize = 256 << 10;

/// Makes every allocation of [`OWN_MAPPING`] or more a mapping of its own, given back to
/// the kernel when freed. glibc otherwise raises that size to the largest block freed so
/// far (up to 32 MiB), after which such blocks come from its arenas and stay resident
/// once freed: a 1080p frame's reference images (about 16 MB, once a minute) or a
/// snapshot's pictures. The frame loops allocate nothing, so the extra system calls fall
/// only on those rare large temporaries.
pub fn map_large_allocations() {
    // SAFETY: mallopt only sets one of malloc's parameters, under its own lock.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, OWN_MAPPING as libc::c_int);
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which pages of `buf`'s whole pages are resident.
    fn resident(buf: &[u8]) -> Vec<bool> {
        let page = page_size();
        let start = buf.as_ptr() as usize;
        let first = start.next_multiple_of(page);
        let last = (start + buf.len()) / page * page;
        let mut v = vec![0u8; (last - first) / page];
        // SAFETY: the range is mapped (inside `buf`) and `v` has a byte a page of it.
        let r = unsafe { libc::mincore(first as *mut libc::c_void, last - first, v.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        v.iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn released_pages_leave_memory_and_come_back_when_written() {
        let n = 64 * page_size();
        let mut buf = vec![7u8; n];
        let pages = resident(&buf).len();
        assert!(pages >= 63, "{pages} whole pages");
        assert!(
            resident(&buf).iter().all(|&r| r),
            "written pages are resident"
        );
        let (ptr, cap) = (buf.as_ptr(), buf.capacity());
        release(&mut buf);
        assert_eq!((buf.as_ptr(), buf.capacity(), buf.len()), (ptr, cap, n));
        assert_eq!(resident(&buf), vec![false; pages]);
        // Every byte still reads as one the kernel gave back or as written before the
        // first whole page and after the last.
        assert!(buf.iter().all(|&b| b == 0 || b == 7));
        buf.fill(9);
        assert_eq!(resident(&buf), vec![true; pages]);
        assert!(buf.iter().all(|&b| b == 9));
    }

    #[test]
    fn a_buffer_of_less_than_a_page_or_none_is_left_alone() {
        let mut small = vec![3u8; 100];
        release(&mut small);
        assert_eq!(small, vec![3u8; 100]);
        let mut empty: Vec<u8> = Vec::new();
        release(&mut empty);
        assert!(empty.is_empty());
    }
}
