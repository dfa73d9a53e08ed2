// Canopy's public API: the one header an embedding program includes (CMake target canopy::canopy).
#pragma once

#include "canopy/communicator.hpp"
#include "canopy/error.hpp"
#include "canopy/store.hpp"
#include "canopy/types.hpp"
