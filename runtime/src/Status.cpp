//===- Status.cpp - cleave_rt_status functions ----------------------------===//

#include "Status.h"

#include <new>

namespace cleave::rt {
cleave_rt_status makeStatus(cleave_rt_status_code_t code, std::string message) {
  return new cleave_rt_status_t{code, std::move(message)};
}
} // namespace cleave::rt

extern "C" {

cleave_rt_status_code_t cleave_rt_status_code(cleave_rt_status status) {
  return status ? status->code : CLEAVE_RT_OK;
}

const char *cleave_rt_status_message(cleave_rt_status status) {
  return status ? status->message.c_str() : "";
}

const char *cleave_rt_status_code_name(cleave_rt_status_code_t code) {
  switch (code) {
  case CLEAVE_RT_OK:
    return "OK";
  case CLEAVE_RT_INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case CLEAVE_RT_NOT_FOUND:
    return "NOT_FOUND";
  case CLEAVE_RT_OUT_OF_RANGE:
    return "OUT_OF_RANGE";
  case CLEAVE_RT_DATA_LOSS:
    return "DATA_LOSS";
  case CLEAVE_RT_UNAVAILABLE:
    return "UNAVAILABLE";
  case CLEAVE_RT_RESOURCE_EXHAUSTED:
    return "RESOURCE_EXHAUSTED";
  case CLEAVE_RT_FAILED_PRECONDITION:
    return "FAILED_PRECONDITION";
  case CLEAVE_RT_UNIMPLEMENTED:
    return "UNIMPLEMENTED";
  case CLEAVE_RT_INTERNAL:
    return "INTERNAL";
  }
  return "UNKNOWN";
}

void cleave_rt_status_free(cleave_rt_status status) { delete status; }

} // extern "C"
