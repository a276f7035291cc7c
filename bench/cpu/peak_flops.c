/* The cores' peak float32 FMA rate: each thread runs 12 independent chains of 512-bit
 * (or, with -DWIDTH=256, 256-bit) fused multiply-adds, enough to fill two FMA pipes of
 * 4-cycle latency. What a matrix kernel could reach at best; BENCHMARKS.md compares the
 * learners' GFLOP/s with it.
 *
 *   gcc -O3 -funroll-loops -march=native -pthread bench/cpu/peak_flops.c -o /tmp/peak_flops
 *   /tmp/peak_flops 1; /tmp/peak_flops 2        (threads)
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef WIDTH
#define WIDTH 512
#endif
#if WIDTH == 512
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define STORE _mm512_storeu_ps
#else
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define STORE _mm256_storeu_ps
#endif
#define CHAINS 12
#define ROUNDS 40000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *work(void *out) {
    vec a[CHAINS], b = SET1(1.0000001f), c = SET1(1e-7f);
    for (int i = 0; i < CHAINS; i++) a[i] = SET1((float)i);
    for (long n = 0; n < ROUNDS; n++)
        for (int i = 0; i < CHAINS; i++) a[i] = FMA(a[i], b, c);
    float s = 0, t[LANES];
    for (int i = 0; i < CHAINS; i++) {
        STORE(t, a[i]);
        s += t[0];
    }
    *(float *)out = s; /* keeps the chains alive */
    return 0;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 256) return 2;
    pthread_t th[256];
    float r[256];
    double t0 = now();
    for (int i = 0; i < threads; i++) pthread_create(&th[i], 0, work, &r[i]);
    for (int i = 0; i < threads; i++) pthread_join(th[i], 0);
    double dt = now() - t0;
    double flops = 2.0 * ROUNDS * CHAINS * LANES * threads;
    printf("%d-bit FMA, %d threads: %.1f GFLOP/s (%.3f s; %g)\n", WIDTH, threads,
           flops / dt / 1e9, dt, r[0]);
    return 0;
}
