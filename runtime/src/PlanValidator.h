//===- PlanValidator.h - The plan validator's state -------------*- C++ -*-===//
//
// Internal to the plan library: the class behind plan::validate, whose
// checks are split over PlanValidate.cpp (arena, tensors, commands,
// collectives, events, states, training, metadata) and
// PlanValidateKernels.cpp (GEMM, attention and grouped GEMM commands).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_PLANVALIDATOR_H
#define CLEAVE_RUNTIME_PLANVALIDATOR_H

#include "cleave/PlanFormat.h"

#include <string>
#include <vector>

namespace cleave::plan::detail {

/// A kernel command's operand: its name, element count (in 128 bits: dims
/// below 2^31 cannot overflow) and element type.
struct KernelOperand {
  const char *name;
  unsigned __int128 elements;
  DType dtype;
};

class Validator {
public:
  Validator(const Plan &plan, std::string *error) : plan(plan), error(error) {}
  bool run();

private:
  bool fail(const std::string &msg) {
    *error = msg;
    return false;
  }
  bool checkRange(const std::string &what, uint64_t offset, uint64_t bytes);
  /// [offset, offset + bytes) lies in the arena and offset is a multiple of
  /// `align` (the element size of what the runtime reads there).
  bool checkAlignedRange(const std::string &what, uint64_t offset,
                         uint64_t bytes, uint64_t align);
  bool checkTensor(const std::string &what, const TensorInfo &t);
  bool checkCommand(const char *label, size_t index, const Command &c);
  bool checkGemm(const std::string &what, const Command &c);
  bool checkGemmEpilogue(const std::string &what, const Command &c);
  bool checkAttention(const std::string &what, const Command &c);
  bool checkGroupedGemm(const std::string &what, const Command &c);
  /// Each operand of a kernel command (in buffer order) fits the arena at
  /// an offset aligned to its element size.
  bool checkOperands(const std::string &what, const Command &c,
                     const std::vector<KernelOperand> &operands);
  bool checkStates();
  bool checkTraining();
  bool checkMesh();
  bool checkCollective(const std::string &what, const Command &c);
  bool checkEvents();
  bool checkMarkers();

  const Plan &plan;
  std::string *error;
  /// The names Marker commands index (metadata meta::kPipelineSteps).
  std::vector<std::string> steps;
};

} // namespace cleave::plan::detail

#endif // CLEAVE_RUNTIME_PLANVALIDATOR_H
