// One core's fused multiply-add peak, for BENCHMARKS.md's "against the machine" figures:
// 12 independent FMA chains (more than latency x units), timed. 8 lanes (AVX2), or 16
// where built for AVX-512:
//   gcc -O2 -mavx2 -mfma bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
//   gcc -O2 -mavx512f bench/fma_peak.c -o /tmp/fma_peak512 && /tmp/fma_peak512
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#ifdef __AVX512F__
typedef __m512 V;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define STORE _mm512_storeu_ps
#define REG "+v"
#else
typedef __m256 V;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define STORE _mm256_storeu_ps
#define REG "+x"
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  V a0=SET1(1.0f),a1=a0,a2=a0,a3=a0,a4=a0,a5=a0,a6=a0,a7=a0,a8=a0,a9=a0,a10=a0,a11=a0;
  V x=SET1(0.999999f), y=SET1(1e-7f);
  long n=400000000;
  double t0=now();
  for(long i=0;i<n;i++){
    a0=FMA(a0,x,y);a1=FMA(a1,x,y);a2=FMA(a2,x,y);a3=FMA(a3,x,y);
    a4=FMA(a4,x,y);a5=FMA(a5,x,y);a6=FMA(a6,x,y);a7=FMA(a7,x,y);
    a8=FMA(a8,x,y);a9=FMA(a9,x,y);a10=FMA(a10,x,y);a11=FMA(a11,x,y);
    __asm__ volatile("" : REG(a0),REG(a1),REG(a2),REG(a3),REG(a4),REG(a5),REG(a6),REG(a7),REG(a8),REG(a9),REG(a10),REG(a11));
  }
  double t=now()-t0;
  V s=ADD(a0,a11);float f[LANES];STORE(f,s);
  printf("%d lanes: %.2f G FMA-instr/s = %.1f GMAC/s (%.3f)\n", LANES, 12.0*n/t/1e9, 12.0*n*LANES/t/1e9, f[0]);
}
