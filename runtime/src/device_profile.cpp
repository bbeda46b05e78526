#include "grid_rbd/device_profile.hpp"

#include <unistd.h>

#include <string>

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

void fill_host_memory(DeviceProfile& profile) {
  const long page = sysconf(_SC_PAGESIZE);
  const long total = sysconf(_SC_PHYS_PAGES);
  const long available = sysconf(_SC_AVPHYS_PAGES);
  if (page > 0 && total > 0) profile.total_memory = int64_t{page} * total;
  if (page > 0 && available > 0) profile.free_memory = int64_t{page} * available;
}

}  // namespace

bool arch_runs_on(const std::string& arch, int32_t major, int32_t minor) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5) return false;
  const std::string digits = arch.substr(3);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return false;
  const int number = std::stoi(digits);
  return number / 10 == major && number % 10 <= minor;
}

DeviceProfile capture_device_profile(const ArtifactLibrary& library) {
  const grid_descriptor& d = library.descriptor();
  grid_device_info info{};
  const int rc = d.query_device(&info);
  DeviceProfile profile;
  profile.compiled_archs = library.compiled_archs();
  profile.max_batch = d.max_batch;
  if (rc != 0) {
    throw ContextError("cannot create a context for robot '" + library.robot_name() +
                       "': no usable device (" + library.error_message(rc) + ")");
  }
  profile.is_gpu = info.is_gpu != 0;
  profile.device = info.device;
  profile.name = info.name;
  profile.cc_major = info.cc_major;
  profile.cc_minor = info.cc_minor;
  profile.multiprocessors = info.multiprocessors;
  profile.total_memory = info.total_memory;
  profile.free_memory = info.free_memory;
  profile.shared_memory_optin = info.shared_memory_optin;
  if (!profile.is_gpu) {
    profile.device_arch = "cpu";
    fill_host_memory(profile);
    return profile;
  }
  profile.device_arch = "sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor);
  bool runs = false;
  for (const std::string& arch : profile.compiled_archs) {
    runs = runs || arch_runs_on(arch, info.cc_major, info.cc_minor);
  }
  if (!runs) {
    throw ContextError("cannot create a context for robot '" + library.robot_name() +
                       "': the artifact was compiled for " + join(profile.compiled_archs) +
                       " but device " + std::to_string(info.device) + " (" + profile.name +
                       ") is " + profile.device_arch + "; rebuild it for " +
                       profile.device_arch);
  }
  return profile;
}

}  // namespace grid_rbd
