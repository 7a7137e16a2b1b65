// distributed.h without MPI (TAC_MPI=OFF or OpenMPI not found): `tune` runs in one process.
#include "tuner/distributed.h"

#include <algorithm>
#include <cstdlib>

namespace tac::tuner {

bool mpi_compiled() { return false; }

int mpi_world_size_from_env() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name); v && *v) return std::max(1, std::atoi(v));
  return 1;
}

Result<MpiWorld> mpi_start() {
  return unsupported("this tactician was built without MPI (TAC_MPI=OFF or OpenMPI not found): run it without mpirun");
}

int run_mpi_worker(const WorkerOptions&) { return 2; }

Result<std::unique_ptr<Evaluators>> mpi_evaluators(const WorkerOptions&, std::string&) {
  return unsupported("this tactician was built without MPI");
}

int mpi_finish(std::unique_ptr<Evaluators>, int exit_code) { return exit_code; }

}  // namespace tac::tuner
