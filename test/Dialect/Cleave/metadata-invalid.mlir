// Verifier errors of the cleave.* metadata attributes: one case per kind of
// value, per place, and an unknown name.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// A string attribute holding an integer.
// expected-error @+1 {{'func.func' op argument 0: cleave.name must be a string, got 3}}
func.func @name_integer(%x: tensor<4xf32> {cleave.name = 3 : i64}) {
  return
}

// -----

// The messages name the argument by its cleave.name when it has one.
// expected-error @+1 {{'func.func' op argument 0 ('w'): cleave.state must be a #cleave.state, got "foo"}}
func.func @state_string(%w: tensor<4xf32> {cleave.name = "w", cleave.state = "foo"}) {
  return
}

// -----

// A state kind that does not exist.
// expected-error @+2 {{expected ::mlir::cleave::StateKind to be one of: parameter, optimizer_state, buffer}}
// expected-error @+1 {{failed to parse Cleave_StateKindAttr parameter 'value'}}
func.func @state_unknown(%w: tensor<4xf32> {cleave.state = #cleave.state<foo>}) {
  return
}

// -----

// A role written as a string (the form before the enum).
// expected-error @+1 {{'func.func' op argument 0: cleave.role must be a #cleave.role, got "data"}}
func.func @role_string(%x: tensor<4xf32> {cleave.role = "data"}) {
  return
}

// -----

// A role on a result that is a state kind.
// expected-error @+1 {{'func.func' op result 0 ('loss'): cleave.role must be a #cleave.role, got #cleave.state<parameter>}}
func.func @role_state(%x: tensor<f32>) -> (tensor<f32> {cleave.name = "loss", cleave.role = #cleave.state<parameter>}) {
  return %x : tensor<f32>
}

// -----

// An integer attribute holding a string.
// expected-error @+1 {{'func.func' op result 0: cleave.updates must be an integer, got "w"}}
func.func @updates_string(%x: tensor<f32>) -> (tensor<f32> {cleave.updates = "w"}) {
  return %x : tensor<f32>
}

// -----

// An initial value that is not an elements attribute.
// expected-error @+1 {{'func.func' op argument 0: cleave.initial_value must be an elements attribute, got 1.000000e+00 : f32}}
func.func @initial_value_scalar(%w: tensor<f32> {cleave.initial_value = 1.0 : f32}) {
  return
}

// -----

// A valid range that is an array of attributes, not array<i64: ...>.
// expected-error @+1 {{'func.func' op argument 0: cleave.valid_range must be an array<i64: ...>, got [0}}
func.func @valid_range_array(%i: tensor<4xi64> {cleave.valid_range = [0, 4]}) {
  return
}

// -----

// Mesh axes named by integers.
// expected-error @+1 {{'func.func' op argument 0: cleave.varying must be an array of strings, got [1}}
func.func @varying_integers(%w: tensor<4xf32> {cleave.varying = [1 : i64]}) {
  return
}

// -----

// A sharding that is not a #cleave.sharding.
// expected-error @+1 {{'func.func' op argument 0 ('x'): cleave.sharding must be a #cleave.sharding, got [["dp"]]}}
func.func @sharding_untyped(%x: tensor<4xf32> {cleave.name = "x", cleave.sharding = [["dp"]]}) {
  return
}

// -----

// An attribute of arguments on a result.
// expected-error @+1 {{'func.func' op result 0: cleave.state belongs on a function argument}}
func.func @state_on_result(%x: tensor<f32>) -> (tensor<f32> {cleave.state = #cleave.state<parameter>}) {
  return %x : tensor<f32>
}

// -----

// An op attribute on an argument.
// expected-error @+1 {{'func.func' op argument 0: cleave.initializer belongs on an op}}
func.func @initializer_on_argument(%x: tensor<f32> {cleave.initializer = "w"}) {
  return
}

// -----

// An unknown name on an argument.
// expected-error @+1 {{'func.func' op argument 0: unknown metadata attribute cleave.nmae}}
func.func @unknown_argument(%x: tensor<f32> {cleave.nmae = "x"}) {
  return
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // An unknown name on an op.
  // expected-error @+1 {{'cleave.unary' op unknown metadata attribute cleave.fp16}}
  %0 = cleave.unary neg %x {cleave.fp16} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unit_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  // A unit tag with a value.
  // expected-error @+1 {{'cleave.unary' op cleave.fp32 must be a unit attribute, got true}}
  %0 = cleave.unary neg %x {cleave.fp32 = true} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @stage_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  // An integer op attribute holding a string.
  // expected-error @+1 {{'cleave.unary' op cleave.stage must be an integer, got "0"}}
  %0 = cleave.unary neg %x {cleave.stage = "0"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @initializer_kind_string() -> tensor<4xf32> {
  // An initializer kind written as a string.
  // expected-error @+1 {{'cleave.constant' op cleave.initializer_kind must be a #cleave.initializer_kind, got "parameter"}}
  %0 = cleave.constant {cleave.initializer = "w", cleave.initializer_kind = "parameter"} dense<1.0> : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @external_data_string() -> tensor<4xf32> {
  // External data that is not a dictionary.
  // expected-error @+1 {{'cleave.constant' op cleave.external_data must be a dictionary, got "w.bin"}}
  %0 = cleave.constant {cleave.external_data = "w.bin"} dense<1.0> : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @sharding_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // An op's shardings are an array, one per result.
  // expected-error @+1 {{'cleave.unary' op cleave.sharding must be a #cleave.sharding array (one per result, unit for none), got #cleave.sharding<@mesh, [{}]>}}
  %0 = cleave.unary neg %x {cleave.sharding = #cleave.sharding<@mesh, [{}]>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reshard_once_array(%x: tensor<4xf32>) -> tensor<4xf32> {
  // The layout to reshard to once is one sharding.
  // expected-error @+1 {{'cleave.unary' op cleave.reshard_once must be a #cleave.sharding, got [#cleave.sharding<@mesh, [{}]>]}}
  %0 = cleave.unary neg %x {cleave.reshard_once = [#cleave.sharding<@mesh, [{}]>]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @stats_on_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // A module attribute on an op.
  // expected-error @+1 {{'cleave.unary' op cleave.recompute_stats belongs on the module}}
  %0 = cleave.unary neg %x {cleave.recompute_stats = {}} : tensor<4xf32>
  return %0 : tensor<4xf32>
}
