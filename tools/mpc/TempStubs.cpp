// Temporary: replaced by Dump.cpp / Inspect.cpp / Run.cpp.
#include "Dump.h"
#include "Tool.h"
using namespace mpc;
int tool::runRun(llvm::ArrayRef<const char *>, const char *const *) { return 1; }
