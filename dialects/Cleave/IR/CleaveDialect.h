//===- CleaveDialect.h - The cleave dialect ---------------------*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVEDIALECT_H
#define CLEAVE_IR_CLEAVEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "Cleave/IR/CleaveDialect.h.inc"

#endif // CLEAVE_IR_CLEAVEDIALECT_H
