// One core's fused multiply-add peak, for BENCHMARKS.md's "against the machine" figures:
// 12 independent 8-lane FMA chains (more than latency x units), timed.
//   gcc -O2 -mavx2 -mfma bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  __m256 a0=_mm256_set1_ps(1.0f),a1=a0,a2=a0,a3=a0,a4=a0,a5=a0,a6=a0,a7=a0,a8=a0,a9=a0,a10=a0,a11=a0;
  __m256 x=_mm256_set1_ps(0.999999f), y=_mm256_set1_ps(1e-7f);
  long n=400000000;
  double t0=now();
  for(long i=0;i<n;i++){
    a0=_mm256_fmadd_ps(a0,x,y);a1=_mm256_fmadd_ps(a1,x,y);a2=_mm256_fmadd_ps(a2,x,y);a3=_mm256_fmadd_ps(a3,x,y);
    a4=_mm256_fmadd_ps(a4,x,y);a5=_mm256_fmadd_ps(a5,x,y);a6=_mm256_fmadd_ps(a6,x,y);a7=_mm256_fmadd_ps(a7,x,y);
    a8=_mm256_fmadd_ps(a8,x,y);a9=_mm256_fmadd_ps(a9,x,y);a10=_mm256_fmadd_ps(a10,x,y);a11=_mm256_fmadd_ps(a11,x,y);
    __asm__ volatile("" : "+x"(a0),"+x"(a1),"+x"(a2),"+x"(a3),"+x"(a4),"+x"(a5),"+x"(a6),"+x"(a7),"+x"(a8),"+x"(a9),"+x"(a10),"+x"(a11));
  }
  double t=now()-t0;
  __m256 s=_mm256_add_ps(a0,a11);float f[8];_mm256_storeu_ps(f,s);
  printf("%.2f G FMA-instr/s = %.1f GMAC/s (%.3f)\n", 12.0*n/t/1e9, 12.0*n*8/t/1e9, f[0]);
}
