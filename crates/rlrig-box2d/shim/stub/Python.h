// Box2D as pybox2d ships it (box2d-py's Common/b2Settings.h) reports a failed b2Assert
// through Python's error indicator and then throws b2AssertException. rlrig has no Python
// here: these two macros (no symbols, so nothing clashes with a real libpython in the same
// process) record the failed condition for the shim, which catches the exception at its
// C boundary (shim/scene.cpp).
#ifndef RLRIG_BOX2D_PYTHON_STUB_H
#define RLRIG_BOX2D_PYTHON_STUB_H
void rlrig_b2_assert_failed(const char* condition);
#define PyExc_AssertionError 0
#define PyErr_SetString(kind, condition) rlrig_b2_assert_failed(condition)
#endif
