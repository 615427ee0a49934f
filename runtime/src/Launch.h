//===- Launch.h - Where a rank comes from: launcher, bootstrap --*- C++ -*-===//
//
// What a process learns from its launcher (torchrun, mpirun, srun): its rank,
// the world size, its rank on the node, and for torchrun the rendezvous
// address. The NCCL communicator of the CUDA backend starts from these: its
// unique id travels from rank 0 to every rank over TCP (torchrun's
// MASTER_ADDR/MASTER_PORT) or over an existing communicator (MPI), and each
// rank takes the GPU of its local rank.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LAUNCH_H
#define CLEAVE_RUNTIME_LAUNCH_H

#include "Communicator.h"
#include "Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt {

struct LaunchEnv {
  /// "torchrun", "mpirun" (OpenMPI), "srun" (Slurm), or "" (no launcher:
  /// one rank).
  std::string launcher;
  int64_t rank = 0, worldSize = 1, localRank = 0;
  /// The rendezvous (readRendezvous; torchrun only unless asked for): the
  /// host of rank 0 and the launcher's port there.
  std::string masterAddr;
  int masterPort = 0;
  /// Where rank 0's own server listens (the NCCL id broadcast, the Gloo
  /// communicator's store), when not on masterPort: $CLEAVE_STORE_PORT, or
  /// masterPort + 1 under a torchrun whose agent serves its own store on
  /// MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True); 0: masterPort.
  int storePort = 0;
  /// The variable the port comes from, for messages: "MASTER_PORT",
  /// "CLEAVE_STORE_PORT" or "MASTER_PORT+1".
  std::string storePortName = "MASTER_PORT";

  /// The port rank 0 listens on for its peers.
  int rendezvousPort() const { return storePort > 0 ? storePort : masterPort; }
};

/// Reads the launcher's variables through `getenv` (std::getenv in use, a
/// map in tests). torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
/// MASTER_PORT (all required once RANK or WORLD_SIZE is set); OpenMPI:
/// OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}; Slurm: SLURM_PROCID,
/// SLURM_NTASKS, SLURM_LOCALID (SLURM_NTASKS alone, as salloc sets it, is
/// no launch). Numbers are parsed strictly; a missing or inconsistent
/// variable is an error naming it.
bool readLaunchEnv(const std::function<const char *(const char *)> &getenv,
                   LaunchEnv *out, std::string *error);

/// The rendezvous part of a launch (readLaunchEnv does it for torchrun; an
/// MPI launch that communicates over TCP anyway asks for it): MASTER_ADDR
/// and MASTER_PORT, both required, and where rank 0 listens (storePort:
/// CLEAVE_STORE_PORT, TORCHELASTIC_USE_AGENT_STORE).
bool readRendezvous(const std::function<const char *(const char *)> &getenv,
                    LaunchEnv *env, std::string *error);

/// The CUDA device of a rank: $CLEAVE_CUDA_DEVICE if set (an ordinal,
/// parsed strictly; `value` is its text or null), else the local rank; an
/// error names the rank and the node's device count when there is no such
/// device.
bool cudaDeviceOf(const LaunchEnv &env, const char *value, int deviceCount,
                  int *device, std::string *error);

/// Sends `blob` from rank 0 to every other rank over TCP: rank 0 listens on
/// env.rendezvousPort() and serves env.worldSize - 1 connections, each rank
/// connects to env.masterAddr at that port (retrying until the deadline)
/// and receives the bytes. A rank that does not connect within
/// `timeoutSeconds` is named by rank 0; a rank that cannot reach rank 0
/// says so, with the address.
cleave_rt_status tcpBroadcast(const LaunchEnv &env, std::vector<uint8_t> *blob,
                              double timeoutSeconds);

/// The Gloo communicator of this process (GlooComm.cpp): rank env.rank of
/// env.worldSize, after a rendezvous through rank 0's store at
/// env.masterAddr:env.rendezvousPort(). Collectives wait at most
/// `timeoutSeconds` for a peer; the rendezvous at least 30 s. UNAVAILABLE
/// in a runtime built without Gloo.
cleave_rt_status createGlooCommunicator(const LaunchEnv &env,
                                        double timeoutSeconds,
                                        std::unique_ptr<Communicator> *out);

/// The same over a communicator (rank 0's bytes to every rank of its
/// world): how MPI launches hand out the NCCL id. Every rank passes a blob
/// of the same size.
cleave_rt_status communicatorBroadcast(Communicator &comm,
                                       std::vector<uint8_t> *blob);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_LAUNCH_H
