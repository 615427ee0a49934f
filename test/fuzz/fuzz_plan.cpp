//===- fuzz_plan.cpp - libFuzzer target: the plan loader ------------------===//
//
// A plan file is what a cluster node reads first; any bytes must be either
// refused with an error or accepted as a plan the validator passes, never
// crash. The input is the payload: the target puts a header with the right
// sizes and checksum in front, so mutations reach the payload parser and
// the validator instead of stopping at the checksum (the checksum and the
// header checks are covered by the seeds' own headers when the first byte
// is 'C', the magic's first letter: then the input is the whole file). The
// header announces the current version, so payloads are version 7 (a
// version-5 payload is the same without the version-6 trailer: varying
// axes, sync interval, entries, and the version-7 one: the host kernel
// object and its table); the pipeline seeds hold stage plans and
// the local-sgd seed an entry, nested payloads the decoder reads with their
// own bounds. The kernel object inside is native code and out of scope.
//
//===----------------------------------------------------------------------===//

#include "cleave/PlanFormat.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace cleave::plan;
  Plan plan;
  std::string error;
  if (size > 0 && data[0] == 'C') {
    (void)deserialize(data, size, &plan, &error);
    return 0;
  }
  std::vector<uint8_t> file(kHeaderSize + size);
  std::memcpy(file.data(), "CLEAVEPL", 8);
  auto put = [&](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      file[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put(8, kFormatVersion, 4);
  put(12, kHeaderSize, 4);
  put(16, size, 8);
  put(24, fnv1a64(data, size), 8);
  if (size)
    std::memcpy(file.data() + kHeaderSize, data, size);
  (void)deserialize(file.data(), file.size(), &plan, &error);
  return 0;
}
