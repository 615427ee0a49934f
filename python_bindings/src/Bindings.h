//===- Bindings.h - Shared by the sources of cleave._cleave ----*- C++ -*-===//
//
// The module's error type and the functions one source file binds that
// another defines (CompileBinding.cpp: compile, the option table, passes).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PYTHON_BINDINGS_H
#define CLEAVE_PYTHON_BINDINGS_H

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace cleave_py {

/// Raised as cleave._cleave.Error (the Python package maps the `kind` to
/// its subclasses: CompileError, RunError, OptionError, ...).
struct CleaveError : std::runtime_error {
  std::string kind;
  CleaveError(std::string kind, const std::string &message)
      : std::runtime_error(message), kind(std::move(kind)) {}
};

[[noreturn]] inline void raise(const std::string &kind,
                               const std::string &message) {
  throw CleaveError(kind, message);
}

/// Compiles the model at `path` with `options` ({option name: value});
/// returns (plan bytes or None, MLIR text printed, messages, report).
nanobind::tuple compile(const std::string &path, const nanobind::dict &options);

/// cleave-compile's option table: (name, kind, value name, help).
std::vector<nanobind::tuple> optionTable();

/// Runs a textual pass pipeline on MLIR text, as cleave-opt does.
std::string runPasses(const std::string &source, const std::string &pipeline);

} // namespace cleave_py

#endif // CLEAVE_PYTHON_BINDINGS_H
