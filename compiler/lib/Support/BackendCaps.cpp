//===- BackendCaps.cpp - Backend capability interface ----------------------===//
#include "mpc/Target/BackendCaps.h"

mpc::BackendCaps::~BackendCaps() = default;
