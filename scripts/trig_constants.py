"""Prints the constants of crates/rlrig-env/src/trig.rs as f64 bit patterns.

pi/2 is split in three doubles (Cody-Waite with a double-double tail); the
Taylor coefficients 1/n! are given as double-double (hi, lo) pairs. mpmath at
300 bits gives every digit that matters; `float()` of an mpf rounds to nearest.
"""
import struct
from math import factorial

import mpmath

mpmath.mp.prec = 300


def bits(x):
    return "0x%016x" % struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def split(v, parts):
    out = []
    for _ in range(parts):
        h = mpmath.mpf(float(v))
        out.append(h)
        v = v - h
    return out


half_pi = mpmath.pi / 2
for name, part in zip(["PIO2_1", "PIO2_2", "PIO2_3"], split(half_pi, 3)):
    print(f"const {name}: f64 = f64::from_bits({bits(part)}); // {mpmath.nstr(part, 20)}")
print(f"const TWO_OVER_PI: f64 = f64::from_bits({bits(2 / mpmath.pi)});")
for n in range(2, 28):
    hi, lo = split(mpmath.mpf(1) / factorial(n), 2)
    print(f"// 1/{n}!: ({bits(hi)}, {bits(lo)})")
