// cudyn-info — the JSON Schema of `cudyn-info --json`, printed by --schema.
//
// Built from the same lists as the report (device_capabilities.def,
// capability_trials.def, the loader's states), so the two cannot disagree.
// Fields are only ever added: cluster scripts keep reading what they read,
// and a consumer ignores fields it does not know (additional properties are
// allowed everywhere). kInfoSchemaVersion goes up when fields are added.
// One exception, in version 4 (cudyn 0.2.0): init_result and
// init_result_name are null where cuInit never ran (before, they named a
// result cuInit never gave).
#pragma once

#include <string>

namespace cudyn::tools {

// 2: peers; 3: identity, NVML, fabric, NVLinks, atomic capabilities; 4: init_result may be null
inline constexpr int kInfoSchemaVersion = 4;

std::string info_schema();

}  // namespace cudyn::tools
