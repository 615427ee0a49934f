//===- GlooRendezvous.h - Gloo's pairs, connected through rank 0 -*- C++ -*-===//
//
// The start of the Gloo communicator (GlooComm.cpp): a Gloo context whose
// TCP pairs connect every two ranks of a launch, after a rendezvous through
// the key-value store that rank 0 serves (KeyValueStore.h). Only built with
// Gloo (CLEAVE_HAVE_GLOO); like GlooComm.cpp it is compiled with exceptions
// and catches Gloo's.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_GLOORENDEZVOUS_H
#define CLEAVE_RUNTIME_GLOORENDEZVOUS_H

#include "Launch.h"
#include "Status.h"

#include <memory>

namespace gloo {
class Context;
} // namespace gloo

namespace cleave::rt {

/// Rank env.rank's context of env.worldSize ranks, its pairs connected.
/// Rank 0 serves the store at env.rendezvousPort() (env.storePortName in
/// messages) and every rank reaches it at env.masterAddr. The rendezvous
/// waits for every rank `timeoutSeconds`, but at least
/// `rendezvousFloorSeconds` (ranks start at different moments: a launcher
/// starts them one by one, and each loads its plan first); a rank that
/// never comes is named. The context's own timeout is `timeoutSeconds`.
/// Each rank's pairs listen on GLOO_SOCKET_IFNAME's address if set, on
/// loopback when MASTER_ADDR is a loopback address, else on the address of
/// this host's name.
cleave_rt_status connectGloo(const LaunchEnv &env, double timeoutSeconds,
                             std::shared_ptr<gloo::Context> *out,
                             double rendezvousFloorSeconds = 30);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_GLOORENDEZVOUS_H
