//===- cleave_rt.hpp - C++ ownership of the runtime's C handles -*- C++ -*-===//
//
// A header-only layer over cleave_rt.h for C++ callers (cleave-run,
// cleave-gradcheck, the runtime's tests and training loop): each handle
// type of the C API owned by a move-only class that destroys it, and a
// status that frees itself. The C API stays the runtime's interface; these
// add no behaviour, only ownership:
//
//   cleave_rt::Program program;
//   if (cleave_rt::Status s{cleave_rt_program_load_file(path, program.out())})
//     return fail(s.message());
//   cleave_rt::Executor exec;
//   ... cleave_rt_executor_create(program, "cpu", exec.out()) ...
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RT_HPP
#define CLEAVE_RT_HPP

#include "cleave_rt.h"

#include <string>
#include <utility>

namespace cleave_rt {

/// Owns one C handle `T` (a pointer; null is empty) and releases it with
/// `Release`. Converts to `T` so that it passes straight to the C API.
template <typename T, void (*Release)(T)> class Handle {
public:
  Handle() = default;
  explicit Handle(T handle) : h(handle) {}
  Handle(Handle &&other) noexcept : h(other.release()) {}
  Handle &operator=(Handle &&other) noexcept {
    reset(other.release());
    return *this;
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  ~Handle() { reset(); }

  T get() const { return h; }
  operator T() const { return h; }
  explicit operator bool() const { return h != nullptr; }

  /// For an `out_` parameter: releases what is held, returns where the C
  /// call stores the new handle.
  T *out() {
    reset();
    return &h;
  }
  /// Gives up ownership.
  T release() { return std::exchange(h, nullptr); }
  void reset(T handle = nullptr) {
    if (h)
      Release(h);
    h = handle;
  }

private:
  T h = nullptr;
};

using Program = Handle<cleave_rt_program, cleave_rt_program_destroy>;
using Executor = Handle<cleave_rt_executor, cleave_rt_executor_destroy>;
using LocalWorld = Handle<cleave_rt_local_world, cleave_rt_local_world_destroy>;
using Communicator =
    Handle<cleave_rt_communicator, cleave_rt_communicator_destroy>;

/// A call's status: empty (false as a condition) on success, else the
/// error, freed when this goes.
class Status : public Handle<cleave_rt_status, cleave_rt_status_free> {
public:
  using Handle::Handle;
  cleave_rt_status_code_t code() const { return cleave_rt_status_code(get()); }
  std::string message() const { return cleave_rt_status_message(get()); }
};

} // namespace cleave_rt

#endif // CLEAVE_RT_HPP
