// Distributed tuning over MPI (issue 6): `mpirun -np N tactician tune ...` runs one search. Rank
// 0 drives the strategy, owns the database and every output file, and only coordinates; ranks
// 1..N-1 are evaluators: each receives jobs (serialized EvalRequests, tuner/dispatch.h), runs them
// in child processes (evaluate_in_child, with the usual time and memory limits) and sends the
// EvalResults back. mpi.h stays inside distributed.cc; without TAC_MPI these functions report
// that MPI is not built in.
//
// MPI is only ever called when mpirun (or another PMI launcher) announced a world of more than one
// process in the environment: the plain binary and the tests never touch it.
#pragma once

#include <memory>
#include <string>

#include "tactician/status.h"
#include "tuner/dispatch.h"

namespace tac::tuner {

// Whether this build has MPI (CMake option TAC_MPI).
bool mpi_compiled();
// The world size the launcher announced (OMPI_COMM_WORLD_SIZE, else PMI_SIZE); 1 when none.
int mpi_world_size_from_env();

struct MpiWorld {
  int rank = 0, size = 1;
};
// MPI_Init, with errors returned rather than fatal on MPI_COMM_WORLD (MPI_ERRORS_RETURN), so a
// worker that dies is seen as a missed deadline, not an abort of the search. Call once, only when
// mpi_world_size_from_env() > 1.
Result<MpiWorld> mpi_start();

struct WorkerOptions {
  std::string model_path;  // checked readable by each worker at start (reported to rank 0)
  int threads = 1;         // cores per evaluator (CPU): node-local evaluator k gets [k*threads, (k+1)*threads)
  std::string backend = "cpu";  // cuda: node-local evaluator k uses GPU k (CUDA_VISIBLE_DEVICES of its children)
  double idle_limit_s = 3600;   // a worker with no word from rank 0 for this long gives up
  // Tests of fault handling (hidden flag --mpi-test-lose RANK[:hang]): that rank dies (_exit) or
  // hangs on its first candidate (its second job: the first is the speed calibration).
  int lose_rank = -1;
  bool lose_by_hanging = false;
};

// Ranks 1..N-1: pin to this rank's cores (or pick its GPU), say hello to rank 0, then serve jobs
// until rank 0 says stop. Finalizes MPI; returns the process exit code.
int run_mpi_worker(const WorkerOptions& opts);

// Rank 0: the pool of the worker ranks, once each has said hello (within a deadline: a rank that
// does not is lost from the start). Errors when a worker cannot read the model or no worker is
// left. `placement` receives one line per worker (host, cores or GPU, or why it is not pinned).
Result<std::unique_ptr<Evaluators>> mpi_evaluators(const WorkerOptions& opts, std::string& placement);

// Rank 0, at the very end: stops the workers still alive and finalizes MPI. When a worker was
// lost, MPI_Finalize could wait for it forever, so rank 0 then aborts the MPI job with
// `exit_code` instead (OpenMPI: mpirun exits with that code after the outputs are written).
// Returns the code the process should exit with.
int mpi_finish(std::unique_ptr<Evaluators> pool, int exit_code);

}  // namespace tac::tuner
