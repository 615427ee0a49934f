//===- Program.h - The object behind cleave_rt_program ---------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_PROGRAM_H
#define CLEAVE_RUNTIME_PROGRAM_H

#include "Backend.h"

struct cleave_rt_program_t {
  cleave::rt::PlanRef plan;
  uint64_t constantBytes = 0;
  uint64_t referencedBytes = 0; ///< Of constants referenced from files.
  size_t referencedFiles = 0;
  std::vector<std::string> stateNames; ///< StateTensor::globalName() each.
  std::string meshString;              ///< plan->mesh.str().
};

#endif // CLEAVE_RUNTIME_PROGRAM_H
