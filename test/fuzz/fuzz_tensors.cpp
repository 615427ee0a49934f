//===- fuzz_tensors.cpp - libFuzzer target: tensor and checkpoint files ---===//
//
// The readers of files users hand to cleave-run: .npy and ONNX TensorProto
// (.pb) inputs, safetensors headers (checkpoints, --export-safetensors
// outputs read back) and the JSON parser of checkpoint manifests and
// indexes. The first byte picks the reader.
//
//===----------------------------------------------------------------------===//

#include "cleave/Json.h"
#include "cleave/Safetensors.h"
#include "cleave/TensorFile.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  std::string error;
  const uint8_t *body = data + 1;
  size_t n = size - 1;
  switch (data[0] % 4) {
  case 0: {
    cleave::tensorfile::HostTensor t;
    (void)cleave::tensorfile::parseNpy(body, n, &t, &error);
    break;
  }
  case 1: {
    cleave::tensorfile::HostTensor t;
    (void)cleave::tensorfile::parseTensorProto(body, n, &t, &error);
    break;
  }
  case 2: {
    cleave::safetensors::Header header;
    (void)cleave::safetensors::decodeHeader(body, n, n, &header, &error);
    break;
  }
  default: {
    cleave::json::Value value;
    (void)cleave::json::parse(
        std::string(reinterpret_cast<const char *>(body), n), &value, &error);
    break;
  }
  }
  return 0;
}
