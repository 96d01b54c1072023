/*
 * Where the probe header was before it moved to include/cudyn/fake/ (its
 * installed name): tests that include "fakecuda/fakecuda_probe.h" keep
 * compiling. New code includes <cudyn/fake/fakecuda_probe.h>.
 */
#include "cudyn/fake/fakecuda_probe.h"
