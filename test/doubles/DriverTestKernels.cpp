//===- DriverTestKernels.cpp - Host kernels for the driver double's tests -===//
//
// Built as a tiny shared object that DriverDoubleTest.cpp attaches to a
// fake kernel image (cleaveDoubleAttachHostKernels), as the runtime does
// with a plan's host kernels: each exports `void name(void **args)`.
//
//===----------------------------------------------------------------------===//

#include <cstdint>

extern "C" {

/// out[i] = a[i] + b[i] for 4 floats: args {a, b, out}.
void cleave_test_add(void **args) {
  const float *a = static_cast<const float *>(args[0]);
  const float *b = static_cast<const float *>(args[1]);
  float *out = static_cast<float *>(args[2]);
  for (int i = 0; i < 4; ++i)
    out[i] = a[i] + b[i];
}

/// Writes the three argument addresses it got into args[2] (3 x uint64).
void cleave_test_args(void **args) {
  uint64_t *out = static_cast<uint64_t *>(args[2]);
  for (int i = 0; i < 3; ++i)
    out[i] = reinterpret_cast<uintptr_t>(args[i]);
}

/// x[i] += 1 for 4 floats, in place: args {x}.
void cleave_test_increment(void **args) {
  float *x = static_cast<float *>(args[0]);
  for (int i = 0; i < 4; ++i)
    x[i] += 1.0f;
}

} // extern "C"
