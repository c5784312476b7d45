// NVIDIA NPP on the frames `edgesight bench --save-frames DIR` writes: the same work as
// edgesight's stages, timed with CUDA events, medians of RUNS calls after a warm-up.
//
//   nvcc -O2 -o npp_bench bench/npp_bench.cpp -lnppial -lnppicc -lnppidei -lnppif -lnppig -lnppim -lnppist -lnppisu -lnppitc -lnppc
//   ./npp_bench DIR 1280x720,1920x1080,3840x2160 RUNS > npp.json
//
// Stages (NPP has no Otsu; its nearest equivalents for the rest):
//   sobel          nppiFilterSobelHorizBorder + VertBorder, 8u -> 16s, 3x3, replicate border
//   histogram      nppiHistogramEven, 256 bins over [0, 256)
//   binarize       nppiCompareC (src > threshold -> 255)
//   integral       nppiIntegral, 8u -> 32s, (W+1)x(H+1)
//   integral_sqsum nppiSqrIntegral, 8u -> 32s sum and 64f squared sum in one call
//   copy           cudaMemcpy device to device of the frame's bytes (read + written)
// Prints one JSON object: {"device", "results": [{"width", "height", "stages": {name: ms}}]}.
#include <cuda_runtime.h>
#include <npp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                                      \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define CHECK_NPP(x)                                                                       \
    do {                                                                                   \
        NppStatus s_ = (x);                                                                \
        if (s_ < 0) {                                                                      \
            fprintf(stderr, "%s:%d %s: NPP status %d\n", __FILE__, __LINE__, #x, (int)s_); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static double median_ms(std::function<void()> fn, cudaStream_t stream, int runs)
{
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++)
        fn();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> t;
    for (int i = 0; i < runs; i++) {
        CHECK_CUDA(cudaEventRecord(a, stream));
        fn();
        CHECK_CUDA(cudaEventRecord(b, stream));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    return t[t.size() / 2];
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FRAME_DIR WxH[,WxH...] RUNS\n", argv[0]);
        return 2;
    }
    std::string dir = argv[1], sizes = argv[2];
    int runs = atoi(argv[3]);
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    NppStreamContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.hStream = stream;
    ctx.nCudaDeviceId = 0;
    ctx.nMultiProcessorCount = prop.multiProcessorCount;
    ctx.nMaxThreadsPerMultiProcessor = prop.maxThreadsPerMultiProcessor;
    ctx.nMaxThreadsPerBlock = prop.maxThreadsPerBlock;
    ctx.nSharedMemPerBlock = prop.sharedMemPerBlock;
    ctx.nCudaDevAttrComputeCapabilityMajor = prop.major;
    ctx.nCudaDevAttrComputeCapabilityMinor = prop.minor;
    CHECK_CUDA(cudaStreamGetFlags(stream, &ctx.nStreamFlags));

    printf("{\"device\": \"%s (NPP %d.%d.%d)\", \"results\": [", prop.name,
           nppGetLibVersion()->major, nppGetLibVersion()->minor, nppGetLibVersion()->build);
    size_t pos = 0;
    bool first = true;
    while (pos < sizes.size()) {
        size_t comma = sizes.find(',', pos);
        std::string s = sizes.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        pos = comma == std::string::npos ? sizes.size() : comma + 1;
        int w = 0, h = 0;
        if (sscanf(s.c_str(), "%dx%d", &w, &h) != 2) {
            fprintf(stderr, "bad size %s\n", s.c_str());
            return 2;
        }
        std::string path = dir + "/frame-" + s + ".gray";
        std::vector<unsigned char> frame((size_t)w * h);
        FILE *f = fopen(path.c_str(), "rb");
        if (!f || fread(frame.data(), 1, frame.size(), f) != frame.size()) {
            fprintf(stderr, "cannot read %s\n", path.c_str());
            return 2;
        }
        fclose(f);

        size_t n = (size_t)w * h, m = (size_t)(w + 1) * (h + 1);
        Npp8u *src, *mask, *copy, *buf_hist;
        Npp16s *dx, *dy;
        Npp32s *hist, *isum, *isum2;
        Npp64f *isq;
        CHECK_CUDA(cudaMalloc(&src, n));
        CHECK_CUDA(cudaMalloc(&mask, n));
        CHECK_CUDA(cudaMalloc(&copy, n));
        CHECK_CUDA(cudaMalloc(&dx, 2 * n));
        CHECK_CUDA(cudaMalloc(&dy, 2 * n));
        CHECK_CUDA(cudaMalloc(&hist, 256 * sizeof(Npp32s)));
        CHECK_CUDA(cudaMalloc(&isum, m * sizeof(Npp32s)));
        CHECK_CUDA(cudaMalloc(&isum2, m * sizeof(Npp32s)));
        CHECK_CUDA(cudaMalloc(&isq, m * sizeof(Npp64f)));
        CHECK_CUDA(cudaMemcpy(src, frame.data(), n, cudaMemcpyHostToDevice));
        NppiSize roi = {w, h};
        NppiPoint origin = {0, 0};
        size_t hist_bytes = 0;
        CHECK_NPP(nppiHistogramEvenGetBufferSize_8u_C1R_Ctx(roi, 257, &hist_bytes, ctx));
        CHECK_CUDA(cudaMalloc(&buf_hist, std::max<size_t>(hist_bytes, 1)));

        double sobel = median_ms([&] {
            CHECK_NPP(nppiFilterSobelVertBorder_8u16s_C1R_Ctx(src, w, roi, origin, dx, 2 * w, roi,
                                                              NPP_MASK_SIZE_3_X_3, NPP_BORDER_REPLICATE, ctx));
            CHECK_NPP(nppiFilterSobelHorizBorder_8u16s_C1R_Ctx(src, w, roi, origin, dy, 2 * w, roi,
                                                               NPP_MASK_SIZE_3_X_3, NPP_BORDER_REPLICATE, ctx));
        }, stream, runs);
        double histogram = median_ms([&] {
            CHECK_NPP(nppiHistogramEven_8u_C1R_Ctx(src, w, roi, hist, 257, 0, 256, buf_hist, ctx));
        }, stream, runs);
        double binarize = median_ms([&] {
            CHECK_NPP(nppiCompareC_8u_C1R_Ctx(src, w, 119, mask, w, roi, NPP_CMP_GREATER, ctx));
        }, stream, runs);
        double integral = median_ms([&] {
            CHECK_NPP(nppiIntegral_8u32s_C1R_Ctx(src, w, isum, (w + 1) * sizeof(Npp32s), roi, 0, ctx));
        }, stream, runs);
        double integral_sqsum = median_ms([&] {
            CHECK_NPP(nppiSqrIntegral_8u32s64f_C1R_Ctx(src, w, isum2, (w + 1) * sizeof(Npp32s), isq,
                                                       (w + 1) * sizeof(Npp64f), roi, 0, 0.0, ctx));
        }, stream, runs);
        double copy_ms = median_ms([&] {
            CHECK_CUDA(cudaMemcpyAsync(copy, src, n, cudaMemcpyDeviceToDevice, stream));
        }, stream, runs);

        // Check the histogram and the integral's last element against the frame.
        std::vector<Npp32s> h_hist(256);
        CHECK_CUDA(cudaMemcpy(h_hist.data(), hist, 256 * sizeof(Npp32s), cudaMemcpyDeviceToHost));
        std::vector<long long> want(256, 0);
        long long total = 0;
        for (unsigned char v : frame) {
            want[v]++;
            total += v;
        }
        bool hist_ok = true;
        for (int i = 0; i < 256; i++)
            hist_ok = hist_ok && want[i] == h_hist[i];
        Npp32s last = 0;
        CHECK_CUDA(cudaMemcpy(&last, isum2 + m - 1, sizeof(Npp32s), cudaMemcpyDeviceToHost));
        bool sum_ok = (unsigned int)last == (unsigned int)total;

        printf("%s\n  {\"width\": %d, \"height\": %d, \"histogram_exact\": %s, \"integral_exact\": %s, "
               "\"stages\": {\"sobel\": %.5f, \"histogram\": %.5f, \"binarize\": %.5f, "
               "\"integral\": %.5f, \"integral_sqsum\": %.5f, \"copy_frame\": %.5f}}",
               first ? "" : ",", w, h, hist_ok ? "true" : "false", sum_ok ? "true" : "false", sobel,
               histogram, binarize, integral, integral_sqsum, copy_ms);
        fflush(stdout);
        first = false;
        cudaFree(src); cudaFree(mask); cudaFree(copy); cudaFree(buf_hist); cudaFree(dx); cudaFree(dy);
        cudaFree(hist); cudaFree(isum); cudaFree(isum2); cudaFree(isq);
    }
    printf("\n]}\n");
    return 0;
}
