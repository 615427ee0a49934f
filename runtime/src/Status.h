//===- Status.h - Construction of cleave_rt_status values ------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_STATUS_H
#define CLEAVE_RUNTIME_STATUS_H

#include "cleave_rt.h"

#include <string>

struct cleave_rt_status_t {
  cleave_rt_status_code_t code;
  std::string message;
};

namespace cleave::rt {

/// A new status with `code` and `message` (never NULL; OK is NULL).
cleave_rt_status makeStatus(cleave_rt_status_code_t code, std::string message);

} // namespace cleave::rt

/// Returns the status of `expr` from the enclosing function if it is an error.
#define CLEAVE_RT_RETURN_IF_ERROR(expr)                                        \
  do {                                                                         \
    cleave_rt_status status_ = (expr);                                         \
    if (status_)                                                               \
      return status_;                                                          \
  } while (0)

#endif // CLEAVE_RUNTIME_STATUS_H
