// cudyn — everything, for programs that do not mind the compile time.
#pragma once

#include "cudyn/device.hpp"
#include "cudyn/device_capabilities.hpp"
#include "cudyn/driver_call.hpp"
#include "cudyn/driver_table.hpp"
#include "cudyn/error.hpp"
#include "cudyn/load_report.hpp"
#include "cudyn/loader.hpp"
#include "cudyn/location.hpp"
#include "cudyn/primary_context.hpp"
#include "cudyn/result.hpp"
#include "cudyn/stream.hpp"
