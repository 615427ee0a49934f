/*===- cleave_rt.h - C API of the Cleave runtime ------------------*- C -*-===*\
 *
 * Loads a compiled plan (.cleave) and runs it. No dependency on MLIR/LLVM.
 *
 * Conventions: every fallible call returns a cleave_rt_status, NULL meaning
 * success; a non-NULL status must be released with cleave_rt_status_free.
 * Results come back through `out_` parameters, which are left untouched on
 * failure. Objects are opaque handles with create/destroy pairs; destroy
 * accepts NULL. An executor keeps what it needs of its program alive, so a
 * program may be destroyed before its executors.
 *
 * Typical use:
 *   cleave_rt_program program;
 *   cleave_rt_executor exec;
 *   check(cleave_rt_program_load_file("m.cleave", &program));
 *   check(cleave_rt_executor_create(program, "cpu", &exec));
 *   check(cleave_rt_executor_set_input(exec, 0, x, sizeof(x)));
 *   check(cleave_rt_executor_run(exec));
 *   check(cleave_rt_executor_output(exec, 0, &data, &bytes));
 *   cleave_rt_executor_destroy(exec);
 *   cleave_rt_program_destroy(program);
 *
\*===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RT_H
#define CLEAVE_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===-- Status ------------------------------------------------------------===*/

typedef enum cleave_rt_status_code_e {
  CLEAVE_RT_OK = 0,
  CLEAVE_RT_INVALID_ARGUMENT = 1,   /* bad argument (index, size, name...) */
  CLEAVE_RT_NOT_FOUND = 2,          /* missing file or symbol */
  CLEAVE_RT_OUT_OF_RANGE = 3,       /* index past the end */
  CLEAVE_RT_DATA_LOSS = 4,          /* malformed, truncated or corrupted plan */
  CLEAVE_RT_UNAVAILABLE = 5,        /* backend not built or no device */
  CLEAVE_RT_RESOURCE_EXHAUSTED = 6, /* out of memory */
  CLEAVE_RT_FAILED_PRECONDITION = 7, /* e.g. running with unset inputs */
  CLEAVE_RT_UNIMPLEMENTED = 8,       /* a plan feature this runtime lacks */
  CLEAVE_RT_INTERNAL = 9
} cleave_rt_status_code_t;

typedef struct cleave_rt_status_t *cleave_rt_status;

/* CLEAVE_RT_OK for NULL. */
cleave_rt_status_code_t cleave_rt_status_code(cleave_rt_status status);
/* "" for NULL; valid until the status is freed. */
const char *cleave_rt_status_message(cleave_rt_status status);
/* "OK", "INVALID_ARGUMENT", ... */
const char *cleave_rt_status_code_name(cleave_rt_status_code_t code);
void cleave_rt_status_free(cleave_rt_status status);

/*===-- Program: a loaded, validated plan ---------------------------------===*/

typedef struct cleave_rt_program_t *cleave_rt_program;

cleave_rt_status cleave_rt_program_load_file(const char *path,
                                             cleave_rt_program *out_program);
/* The bytes are copied; `data` may be freed after the call. */
cleave_rt_status cleave_rt_program_load_memory(const void *data, size_t size,
                                               cleave_rt_program *out_program);
void cleave_rt_program_destroy(cleave_rt_program program);

/* Describes an input or output. Pointers stay valid while the program lives. */
typedef struct cleave_rt_tensor_desc_t {
  const char *name;
  uint32_t dtype; /* ONNX TensorProto element type code (1 = float32, ...) */
  size_t rank;
  const int64_t *dims; /* `rank` entries */
  size_t byte_size;
} cleave_rt_tensor_desc_t;

size_t cleave_rt_program_input_count(cleave_rt_program program);
size_t cleave_rt_program_output_count(cleave_rt_program program);
cleave_rt_status
cleave_rt_program_input_desc(cleave_rt_program program, size_t index,
                             cleave_rt_tensor_desc_t *out_desc);
cleave_rt_status
cleave_rt_program_output_desc(cleave_rt_program program, size_t index,
                              cleave_rt_tensor_desc_t *out_desc);
/* Index of the input/output named `name`, or OUT_OF_RANGE/NOT_FOUND. */
cleave_rt_status cleave_rt_program_find_input(cleave_rt_program program,
                                              const char *name,
                                              size_t *out_index);
cleave_rt_status cleave_rt_program_find_output(cleave_rt_program program,
                                               const char *name,
                                               size_t *out_index);

/* Peak memory of one executor: the arena size in bytes. */
uint64_t cleave_rt_program_peak_bytes(cleave_rt_program program);
/* Bytes of constant data held by the plan (included in the peak). */
uint64_t cleave_rt_program_constant_bytes(cleave_rt_program program);
/* Bytes of initial values the plan references from files (the model's
 * external data) instead of holding them, and the number of such files. */
uint64_t cleave_rt_program_referenced_bytes(cleave_rt_program program);
size_t cleave_rt_program_referenced_files(cleave_rt_program program);
/* Looks for every file the plan references (by its name) in `dir` instead of
 * the folder it was compiled from: for a plan run where the model's external
 * data lies elsewhere. Affects executors created afterwards. */
cleave_rt_status cleave_rt_program_set_weights_dir(cleave_rt_program program,
                                                   const char *dir);
/* Executors created afterwards leave the referenced initial values unread
 * (zero): for a caller that writes every state itself, such as a training
 * run resuming from a checkpoint. */
cleave_rt_status
cleave_rt_program_skip_referenced_values(cleave_rt_program program);
size_t cleave_rt_program_command_count(cleave_rt_program program);
/* The target triple-like string the plan was compiled for ("cpu-x86_64"). */
const char *cleave_rt_program_target(cleave_rt_program program);
/* Value of metadata `key`, or NULL if absent. */
const char *cleave_rt_program_metadata(cleave_rt_program program,
                                       const char *key);

/* "float32", "int64", ... for an ONNX element type code; "unknown" else. */
const char *cleave_rt_dtype_name(uint32_t dtype);
/* Bytes per element; 0 for an unknown code. */
size_t cleave_rt_dtype_size(uint32_t dtype);

/*===-- Executor: one arena + a backend that runs the commands ------------===*/

typedef struct cleave_rt_executor_t *cleave_rt_executor;

/* `backend` is "cpu" (also accepted: NULL or "") or "cuda" (plans compiled
 * for a "cuda-..." target). "cuda" returns UNAVAILABLE, with the reason, on
 * a machine without the NVIDIA driver (libcuda.so.1) or without a device.
 * Allocates the arena, copies the constants in, loads the kernels and runs
 * the plan's init commands. */
cleave_rt_status cleave_rt_executor_create(cleave_rt_program program,
                                           const char *backend,
                                           cleave_rt_executor *out_executor);
void cleave_rt_executor_destroy(cleave_rt_executor executor);

/* Copies `bytes` bytes into input `index`; `bytes` must equal its byte size. */
cleave_rt_status cleave_rt_executor_set_input(cleave_rt_executor executor,
                                              size_t index, const void *data,
                                              size_t bytes);
/* Runs every command in order. All inputs must have been set once. */
cleave_rt_status cleave_rt_executor_run(cleave_rt_executor executor);
/* Points *out_data at output `index` (host memory owned by the executor,
 * valid until the next run or destroy) and sets *out_bytes to its size. */
cleave_rt_status cleave_rt_executor_output(cleave_rt_executor executor,
                                           size_t index, const void **out_data,
                                           size_t *out_bytes);
/* One line describing where the executor runs: "cpu", or for "cuda" the
 * device, its compute capability, the driver version and the NCCL version
 * (or why NCCL is unavailable; a plan without collectives runs without it).
 * Valid while the executor lives; "" for NULL. */
const char *cleave_rt_executor_device_info(cleave_rt_executor executor);
/* Bytes of initial values this executor read from the files its plan
 * references: its own shards only. */
uint64_t cleave_rt_executor_initial_bytes_read(cleave_rt_executor executor);

/* Tracing: with `enabled` non-zero, each later run records every marker
 * command it executes (the step index, the phase: 0 begins, 1 ends, and the
 * steady-clock time); without tracing a marker costs nothing. UNIMPLEMENTED
 * on the cuda backend. */
typedef struct cleave_rt_marker_record_t {
  int64_t index;
  int64_t phase;
  int64_t time_ns; /* steady clock (CLOCK_MONOTONIC), nanoseconds */
} cleave_rt_marker_record_t;
cleave_rt_status cleave_rt_executor_set_tracing(cleave_rt_executor executor,
                                                int enabled);
/* The markers of the last traced run, in order (valid until the next run or
 * destroy), and the steady-clock time that run started. */
cleave_rt_status
cleave_rt_executor_markers(cleave_rt_executor executor,
                           const cleave_rt_marker_record_t **out_records,
                           size_t *out_count, int64_t *out_run_start_ns);

/* Profiling: with `enabled` non-zero, each later run adds the wall time of
 * every command of the step (steady clock, around the command; a collective
 * submitted to the communication thread counts its submission only) to
 * that command's total. Enabling starts the totals from zero. UNIMPLEMENTED
 * on the cuda backend (whose launches are asynchronous). */
typedef struct cleave_rt_command_profile_t {
  const char *kind;  /* "kernel", "gemm", "copy", ... */
  const char *label; /* the kernel's name, the GEMM's shape, a byte count */
  double seconds;    /* total over the profiled runs */
} cleave_rt_command_profile_t;
cleave_rt_status cleave_rt_executor_set_profiling(cleave_rt_executor executor,
                                                  int enabled);
/* One record per command of the step, in plan order, and the number of
 * profiled runs (valid until the next run, set_profiling or destroy). */
cleave_rt_status
cleave_rt_executor_profile(cleave_rt_executor executor,
                           const cleave_rt_command_profile_t **out_records,
                           size_t *out_count, int64_t *out_runs);

/* Memory measurement: with `enabled` non-zero, each later run first fills
 * every arena byte that holds no constant, no state, no input and nothing
 * the init commands set up with a poison pattern (each byte's value a hash
 * of its offset, never 0x00 or 0xFF), and afterwards finds the bytes that
 * no longer hold their poison: the bytes the run wrote. A byte written with
 * its own poison value goes unseen (for random data, one in 254). A plan
 * that reads a byte it never wrote sees poison there, so such a run's
 * results may differ from an unmeasured one's. UNIMPLEMENTED on the cuda
 * backend (its arena is device memory). */
typedef struct cleave_rt_memory_usage_t {
  uint64_t arena_bytes;     /* the plan's arena: the compiler's peak */
  uint64_t held_bytes;      /* constants, states, inputs, init values: not
                               poisoned, not counted below */
  uint64_t written_bytes;   /* bytes of the rest the run wrote */
  uint64_t high_water_mark; /* one past the highest of those; 0 if none:
                               the run never touched a poisoned byte above */
} cleave_rt_memory_usage_t;
cleave_rt_status cleave_rt_executor_measure_memory(cleave_rt_executor executor,
                                                   int enabled);
/* The figures of the last measured run; FAILED_PRECONDITION before one. */
cleave_rt_status
cleave_rt_executor_memory_usage(cleave_rt_executor executor,
                                cleave_rt_memory_usage_t *out_usage);

/*===-- Ranks: communicators and partitioned plans -------------------------===*/

/* A plan compiled for a mesh (cleave.mesh; `mesh` below) runs on as many
 * ranks as the mesh has, each with its own executor and a communicator
 * that connects it to the others. Every rank runs the same plan (SPMD).
 *
 * Local world: N ranks as threads of this process (one machine, tests).
 * Each thread makes its communicator with _create_local and its executor
 * with executor_create_ranked. Collectives wait at most `timeout_seconds`
 * for a peer; a rank that fails, aborts or exits makes its peers' waiting
 * collectives fail with a message naming it. */
typedef struct cleave_rt_local_world_t *cleave_rt_local_world;
typedef struct cleave_rt_communicator_t *cleave_rt_communicator;

cleave_rt_status cleave_rt_local_world_create(size_t ranks,
                                              double timeout_seconds,
                                              cleave_rt_local_world *out_world);
/* The world lives until it and every communicator made from it are
 * destroyed. */
void cleave_rt_local_world_destroy(cleave_rt_local_world world);
cleave_rt_status
cleave_rt_communicator_create_local(cleave_rt_local_world world, size_t rank,
                                    cleave_rt_communicator *out_comm);
/* MPI: this process is one rank of an mpirun/srun job (MPI_COMM_WORLD).
 * Initializes MPI if the caller has not (and finalizes it on destroy).
 * UNAVAILABLE in a runtime built without MPI. An abort ends the whole job
 * (MPI_Abort). */
cleave_rt_status
cleave_rt_communicator_create_mpi(double timeout_seconds,
                                  cleave_rt_communicator *out_comm);
/* Gloo: this process is one rank of a job started without MPI (torchrun, a
 * Kubernetes job): rank RANK of WORLD_SIZE, connected over TCP (libgloo)
 * after a rendezvous through a store that rank 0 serves at MASTER_ADDR, on
 * CLEAVE_STORE_PORT if set, else MASTER_PORT+1 when torchrun's agent holds
 * MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), else MASTER_PORT. Under
 * mpirun or srun the job exports MASTER_ADDR and MASTER_PORT. UNAVAILABLE
 * in a runtime built without Gloo. An abort closes this rank's connections,
 * so that its peers' collectives fail at once. */
cleave_rt_status
cleave_rt_communicator_create_gloo(double timeout_seconds,
                                   cleave_rt_communicator *out_comm);
/* Destroying a communicator tells its peers that the rank has exited. */
void cleave_rt_communicator_destroy(cleave_rt_communicator comm);
size_t cleave_rt_communicator_rank(cleave_rt_communicator comm);
size_t cleave_rt_communicator_size(cleave_rt_communicator comm);
/* "local", "mpi" or "gloo". */
const char *cleave_rt_communicator_kind(cleave_rt_communicator comm);
/* Makes the peers' pending and later collectives fail, naming this rank and
 * `reason` (call it when this rank hits an error). */
void cleave_rt_communicator_abort(cleave_rt_communicator comm,
                                  const char *reason);
/* As _abort; an MPI job then ends with exit status `exit_code` (MPI_Abort's
 * error code; cleave/ExitCodes.h says which a driver uses). */
void cleave_rt_communicator_abort_with_code(cleave_rt_communicator comm,
                                            const char *reason, int exit_code);

/* The communication timeout (seconds) `comm` was made with; 0 for NULL. */
double cleave_rt_communicator_timeout(cleave_rt_communicator comm);

/* --flight-recorder: `comm` keeps a ring of its last `capacity` collectives,
 * sends and receives, dumped as DIR/rank-<r>.json when one of them fails,
 * when the rank aborts, on SIGUSR1 and on SIGSEGV, SIGBUS or SIGABRT (the
 * process's handlers are installed by the first recorder). */
cleave_rt_status
cleave_rt_communicator_set_flight_recorder(cleave_rt_communicator comm,
                                           const char *dir, size_t capacity);

/* Every rank contributes `bytes` bytes of `data`; `out` (size * bytes) gets
 * all contributions in rank order, on every rank. For drivers (assembling
 * outputs); a collective over the whole world, with the usual timeout. */
cleave_rt_status cleave_rt_communicator_gather(cleave_rt_communicator comm,
                                               const void *data, size_t bytes,
                                               void *out);

/* What this process's launcher says (torchrun: RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, MASTER_PORT; mpirun: OMPI_COMM_WORLD_*; srun:
 * SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). `launcher` is "torchrun",
 * "mpirun", "srun", or "" when none launched it (rank 0 of 1). A missing or
 * malformed variable is an INVALID_ARGUMENT naming it. */
typedef struct cleave_rt_launch_env_t {
  char launcher[16];
  int64_t rank, world_size, local_rank;
} cleave_rt_launch_env_t;
cleave_rt_status cleave_rt_read_launch_env(cleave_rt_launch_env_t *out);

/* Like executor_create, for rank cleave_rt_communicator_rank(comm) of the
 * plan's mesh (of a pipelined plan: that rank's stage). `comm` may be NULL
 * for a plan without a mesh or with a one-rank mesh; otherwise its size
 * must equal the mesh's (the error names both). The communicator must
 * outlive the executor. */
cleave_rt_status
cleave_rt_executor_create_ranked(cleave_rt_program program, const char *backend,
                                 cleave_rt_communicator comm,
                                 cleave_rt_executor *out_executor);

/* The global shape of input (output) `index` and where rank `mesh_rank`'s
 * shard starts in it: `global_dims` and `offsets` get desc.rank entries
 * each. For a replicated tensor the global shape is the local one, the
 * offsets are 0 and *out_sharded is 0. */
cleave_rt_status cleave_rt_program_input_shard(cleave_rt_program program,
                                               size_t index, size_t mesh_rank,
                                               int64_t *global_dims,
                                               int64_t *offsets,
                                               int *out_sharded);
cleave_rt_status cleave_rt_program_output_shard(cleave_rt_program program,
                                                size_t index, size_t mesh_rank,
                                                int64_t *global_dims,
                                                int64_t *offsets,
                                                int *out_sharded);

/* The same for state `index` (cleave_rt_program_state_desc). */
cleave_rt_status cleave_rt_program_state_shard(cleave_rt_program program,
                                               size_t index, size_t mesh_rank,
                                               int64_t *global_dims,
                                               int64_t *offsets,
                                               int *out_sharded);

/* The plan's mesh as "dp=2,tp=2" ("" without one), its world size (1
 * without one), and the number of collective commands (of every stage, for
 * a whole pipelined plan). */
const char *cleave_rt_program_mesh(cleave_rt_program program);
size_t cleave_rt_program_world_size(cleave_rt_program program);
size_t cleave_rt_program_collective_count(cleave_rt_program program);

/*===-- Pipelined plans: one program per stage ----------------------------===*/

/* A pipelined plan (format 5) is MPMD over the mesh axis "pp" of size p: it
 * holds p stage plans, and every rank whose "pp" coordinate is c runs stage
 * c's. All stages have the same inputs, outputs and training record, so a
 * program loaded from a pipelined file describes those (stage 0's) like any
 * plan's; its counts (commands, collectives, markers, constant and
 * referenced bytes) cover every stage, its peak is the largest stage's, and
 * its states are refused (they differ per stage: ask a stage).
 * cleave_rt_executor_create_ranked runs the communicator rank's stage;
 * cleave_rt_executor_create refuses a pipelined plan over more than one
 * rank. A handle on one stage is a program like any other (its metadata
 * falls back to the file's); it takes the file as it is when made, so call
 * _set_weights_dir and _skip_referenced_values on the file first. */

/* The number of stages of a pipelined plan; 0 for a plan that is not
 * pipelined and for a stage's handle. */
size_t cleave_rt_program_stage_count(cleave_rt_program program);
/* The stage rank `mesh_rank` runs (its "pp" coordinate; 0 when not
 * pipelined). */
cleave_rt_status cleave_rt_program_stage_of_rank(cleave_rt_program program,
                                                 size_t mesh_rank,
                                                 size_t *out_stage);
/* A new program handle (destroy it) for the plan rank `mesh_rank` runs: its
 * stage of a pipelined plan, the plan itself otherwise. On a stage's handle,
 * INVALID_ARGUMENT for a rank of another stage. */
cleave_rt_status cleave_rt_program_stage(cleave_rt_program program,
                                         size_t mesh_rank,
                                         cleave_rt_program *out_stage);
/* A new program handle for stage `stage` (< stage_count; 0 for a plan that
 * is not pipelined, which gives the plan itself). */
cleave_rt_status cleave_rt_program_stage_at(cleave_rt_program program,
                                            size_t stage,
                                            cleave_rt_program *out_stage);
/* The stage a handle made by _stage or _stage_at is; 0 otherwise. */
size_t cleave_rt_program_stage_index(cleave_rt_program program);
/* The number of step marker commands (metadata "pipeline_steps" names the
 * steps they index). */
size_t cleave_rt_program_marker_count(cleave_rt_program program);

/*===-- Training: state tensors, the training record ----------------------===*/

/* Parameters and optimizer state are state tensors: they live in the
 * executor's arena across runs and the plan's commands update them in place.
 * Parameters start from their initial values (constants), optimizer state is
 * set up by the plan's init commands, which run once in executor_create. */

typedef enum cleave_rt_state_kind_e {
  CLEAVE_RT_STATE_PARAMETER = 1,
  CLEAVE_RT_STATE_OPTIMIZER_STATE = 2,
  /* Model state updated but not trained (BatchNorm running statistics). */
  CLEAVE_RT_STATE_BUFFER = 3
} cleave_rt_state_kind_t;

/* Pointers stay valid while the program lives. */
typedef struct cleave_rt_state_desc_t {
  cleave_rt_tensor_desc_t tensor; /* arena tensor name, dtype, shape, size */
  cleave_rt_state_kind_t kind;
  /* Parameters: the ONNX initializer name. Optimizer state: the parameter it
   * belongs to. */
  const char *parameter;
  const char *slot;        /* "" for parameters; "momentum", "adam_m", ... */
  const char *global_name; /* checkpoint key: parameter or "<param>.<slot>" */
  int sharded; /* 1 if split over the plan's mesh (tensor is this rank's shard)
                */
} cleave_rt_state_desc_t;

size_t cleave_rt_program_state_count(cleave_rt_program program);
cleave_rt_status cleave_rt_program_state_desc(cleave_rt_program program,
                                              size_t index,
                                              cleave_rt_state_desc_t *out_desc);
/* How many different values state `index` has over the mesh's ranks that
 * hold the same shard of it (its varying axes: local SGD's replicas, a
 * delayed reduction's local gradients), and which of them rank
 * `mesh_rank` holds: 1 and 0 for a state that is the same on all of them.
 * Checkpoints store a varying state with a leading dimension of
 * *out_replicas. */
cleave_rt_status cleave_rt_program_state_replica(cleave_rt_program program,
                                                 size_t index, size_t mesh_rank,
                                                 int64_t *out_replicas,
                                                 int64_t *out_replica);

/* Named entries: programs besides the step that a driver runs now and then
 * (format 6), each borrowing some of the plan's states: copy them in
 * (cleave_rt_executor_read_state on the step's executor, _write_state on
 * the entry's), run the entry's executor, copy them back. The number of
 * entries of a file's handle (0 for an entry's or a stage's handle), and a
 * new handle (destroy it) on the entry named `name`, NOT_FOUND if none;
 * executor_create_ranked on it runs the entry. */
size_t cleave_rt_program_entry_count(cleave_rt_program program);
cleave_rt_status cleave_rt_program_entry(cleave_rt_program program,
                                         const char *name,
                                         cleave_rt_program *out_entry);

/* Index of the state whose global name is `global_name`, or NOT_FOUND. */
cleave_rt_status cleave_rt_program_find_state(cleave_rt_program program,
                                              const char *global_name,
                                              size_t *out_index);

typedef enum cleave_rt_lr_schedule_e {
  CLEAVE_RT_LR_CONSTANT = 0,
  CLEAVE_RT_LR_LINEAR_WARMUP = 1,
  CLEAVE_RT_LR_COSINE = 2
} cleave_rt_lr_schedule_t;

/* Mirror of the plan's training record (cleave::plan::TrainingInfo). Indices
 * are into the program's inputs/outputs; -1 for step_input and
 * grad_norm_output means the plan has none. Pointers stay valid while the
 * program lives. */
typedef struct cleave_rt_training_info_t {
  int enabled; /* 0: not a training plan; the other fields are defaults */
  const char *optimizer; /* "sgd", "momentum", "nesterov", "adam", "adamw" */
  int64_t lr_input, step_input;          /* f32 scalar inputs */
  int64_t loss_output, grad_norm_output; /* f32 scalar outputs */
  cleave_rt_lr_schedule_t schedule;
  double base_lr, min_lr;
  int64_t warmup_steps, total_steps;
  int64_t reference_batch; /* > 0: lr *= global_batch / reference_batch */
  int64_t batch_size, sequence_length; /* of the data inputs; 0 = unknown */
  size_t data_input_count;
  const int64_t *data_inputs; /* input indices fed from the dataset, in order */
  /* > 0: run entry "sync" (cleave_rt_program_entry) after every
   * sync_every-th step (local SGD, DiLoCo); 0: none. */
  int64_t sync_every;
} cleave_rt_training_info_t;

cleave_rt_status
cleave_rt_program_training_info(cleave_rt_program program,
                                cleave_rt_training_info_t *out_info);

/* The learning rate of 0-based `step`:
 *   constant:      base
 *   linear warmup: base * (step+1) / warmup for step < warmup, then base
 *   cosine:        warmup as above, then
 *                  min + 0.5 * (base - min) * (1 + cos(pi * progress)),
 *                  progress = (step - warmup) / max(1, total - warmup)
 *                  clamped to [0, 1]
 * then times global_batch / reference_batch when both are > 0. 0 for NULL. */
double cleave_rt_learning_rate(const cleave_rt_training_info_t *info,
                               int64_t step, int64_t global_batch);

/* Copies state `index` out of / into the executor's arena; `bytes` must equal
 * its byte size. Reads see the values after the last run. */
cleave_rt_status cleave_rt_executor_read_state(cleave_rt_executor executor,
                                               size_t index, void *dst,
                                               size_t bytes);
cleave_rt_status cleave_rt_executor_write_state(cleave_rt_executor executor,
                                                size_t index, const void *src,
                                                size_t bytes);

/* Host memory for copies of states: page-locked on the cuda backend
 * (cuMemHostAlloc), so that cleave_rt_executor_read_state into it is one
 * device-to-host DMA; plain memory on the CPU. Freed with
 * cleave_rt_executor_host_free on the same executor, before it is
 * destroyed. */
cleave_rt_status cleave_rt_executor_host_alloc(cleave_rt_executor executor,
                                               size_t bytes, void **out_data);
void cleave_rt_executor_host_free(cleave_rt_executor executor, void *data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CLEAVE_RT_H */
