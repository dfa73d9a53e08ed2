// torch destroys a process group with the GIL held (destroy_process_group, interpreter exit), while a
// completion thread may be about to run a Python Future callback that needs it: joining that thread with
// the GIL held would deadlock.
#pragma once

#include <functional>

namespace canopy::pytorch {

// Runs `f` with the GIL released if this thread holds it.
void without_gil(const std::function<void()>& f);

}  // namespace canopy::pytorch
