/* grid_rbd/abi.h: the C ABI of a grid-rbd artifact, as the runtime reads it.
 *
 * One header for both readers: this includes the generator's own
 * codegen/grid_codegen/include/grid/abi.h, the text every generated grid.cuh inlines
 * (the build adds codegen/grid_codegen/include to the include path). An artifact that
 * includes grid.cuh and this header together sees the types once.
 */
#ifndef GRID_RBD_ABI_H
#define GRID_RBD_ABI_H

#include "grid/abi.h"

#endif
