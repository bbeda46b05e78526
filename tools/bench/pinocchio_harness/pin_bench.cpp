// Times Pinocchio's own C++ (header-only, compiled here at -O3) on a batch of states:
// rnea, aba, computeRNEADerivatives and computeABADerivatives, one item after another on
// one core or split over OpenMP threads (one pinocchio::Data per thread), each result
// copied into a per-item output array as a batched API would return it.
//
//   pin_bench --model MODEL.txt --states STATES.bin --threads T
//             [--min-reps 20] [--min-seconds 0.2] [--dump OUT.bin --dump-items K]
//
// MODEL.txt: a pinocchio::Model saved by `model.saveToText()` (from the Python driver, so
// the URDF parser's compiled library never meets this binary's -march flags).
// STATES.bin: B items of float64 [q (nq), v (nv), a (nv), tau (nv)], row-major.
// Prints one JSON object, per algorithm: the median and the fastest pass divided by B, in
// wall time and in process CPU time (the latter, with one thread, is what one core spent,
// whatever else the machine runs).
// --dump writes, for the first K items, [tau, ddq, dtau_dq, dtau_dv, ddq_dq, ddq_dv]
// (matrices row-major) as float64, for the driver's cross-check.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "pinocchio/algorithm/aba-derivatives.hpp"
#include "pinocchio/algorithm/aba.hpp"
#include "pinocchio/algorithm/rnea-derivatives.hpp"
#include "pinocchio/algorithm/rnea.hpp"
#include "pinocchio/multibody.hpp"
#include "pinocchio/serialization.hpp"

namespace {

using Model = pinocchio::Model;
using Data = pinocchio::Data;
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Args {
  std::string model, states, dump;
  int threads = 1;
  int min_reps = 20;
  double min_seconds = 0.2;
  int dump_items = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "pin_bench: " << why << "\nusage: pin_bench --model M.txt --states S.bin "
            << "--threads T [--min-reps N] [--min-seconds S] [--dump D.bin --dump-items K]\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) usage("missing value after " + key);
    const std::string value = argv[++i];
    try {
      if (key == "--model") a.model = value;
      else if (key == "--states") a.states = value;
      else if (key == "--dump") a.dump = value;
      else if (key == "--threads") a.threads = std::stoi(value);
      else if (key == "--min-reps") a.min_reps = std::stoi(value);
      else if (key == "--min-seconds") a.min_seconds = std::stod(value);
      else if (key == "--dump-items") a.dump_items = std::stoi(value);
      else usage("unknown option " + key);
    } catch (const std::logic_error&) {
      usage("bad number for " + key + ": " + value);
    }
  }
  if (a.model.empty() || a.states.empty()) usage("--model and --states are required");
  if (a.threads < 1 || a.min_reps < 1 || a.min_seconds < 0 || a.dump_items < 0)
    usage("threads and min-reps must be >= 1, min-seconds and dump-items >= 0");
  return a;
}

std::vector<double> read_doubles(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::streamsize bytes = in.tellg();
  if (bytes % static_cast<std::streamsize>(sizeof(double)) != 0)
    throw std::runtime_error(path + " is not a whole number of float64 values");
  std::vector<double> values(static_cast<size_t>(bytes) / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), bytes);
  return values;
}

// One batch of inputs, as Eigen maps over the row-major states file.
struct Batch {
  int nq, nv, size;
  std::vector<double> raw;
  int stride() const { return nq + 3 * nv; }
  Eigen::Map<const Eigen::VectorXd> q(int i) const { return {raw.data() + i * stride(), nq}; }
  Eigen::Map<const Eigen::VectorXd> v(int i) const { return {at(i, nq), nv}; }
  Eigen::Map<const Eigen::VectorXd> a(int i) const { return {at(i, nq + nv), nv}; }
  Eigen::Map<const Eigen::VectorXd> tau(int i) const { return {at(i, nq + 2 * nv), nv}; }

 private:
  const double* at(int i, int offset) const { return raw.data() + i * stride() + offset; }
};

// Output arrays: what a batched API hands back per item.
struct Outputs {
  std::vector<double> tau, ddq, did, dfd;  // did / dfd: nv x 2nv per item, row-major
  Outputs(int batch, int nv)
      : tau(size_t(batch) * nv), ddq(size_t(batch) * nv), did(size_t(batch) * nv * 2 * nv),
        dfd(size_t(batch) * nv * 2 * nv) {}
};

using ItemFn = std::function<void(Data&, int)>;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct Seconds {
  double wall, cpu;
};

// Runs `fn` on every item once (one pass), on `threads` threads.
Seconds one_pass(const ItemFn& fn, std::vector<Data>& datas, int batch, int threads) {
  const double c0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  if (threads == 1) {
    for (int i = 0; i < batch; ++i) fn(datas[0], i);
  } else {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int i = 0; i < batch; ++i) {
#ifdef _OPENMP
      fn(datas[size_t(omp_get_thread_num())], i);
#else
      fn(datas[0], i);
#endif
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {wall, cpu_seconds() - c0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timing {
  double median_s, min_s, median_cpu_s, min_cpu_s;
  int reps;
};

Timing time_passes(const ItemFn& fn, std::vector<Data>& datas, int batch, const Args& args) {
  one_pass(fn, datas, batch, args.threads);  // warm-up: caches, page faults, thread pool
  std::vector<double> wall, cpu;
  double spent = 0;
  while (int(wall.size()) < args.min_reps || spent < args.min_seconds) {
    const Seconds s = one_pass(fn, datas, batch, args.threads);
    wall.push_back(s.wall);
    cpu.push_back(s.cpu);
    spent += s.wall;
    if (wall.size() >= 100000) break;
  }
  return {median(wall), *std::min_element(wall.begin(), wall.end()), median(cpu),
          *std::min_element(cpu.begin(), cpu.end()), int(wall.size())};
}

void store_gradient(double* out, const Eigen::MatrixXd& d_dq, const Eigen::MatrixXd& d_dv,
                    int nv) {
  Eigen::Map<RowMatrix> m(out, nv, 2 * nv);
  m.leftCols(nv) = d_dq;
  m.rightCols(nv) = d_dv;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  Model model;
  try {
    model.loadFromText(args.model);
  } catch (const std::exception& e) {
    std::cerr << "pin_bench: cannot load the model " << args.model << ": " << e.what() << "\n";
    return 1;
  }
  Batch batch{model.nq, model.nv, 0, {}};
  try {
    batch.raw = read_doubles(args.states);
  } catch (const std::exception& e) {
    std::cerr << "pin_bench: " << e.what() << "\n";
    return 1;
  }
  if (batch.raw.empty() || batch.raw.size() % size_t(batch.stride()) != 0) {
    std::cerr << "pin_bench: " << args.states << " holds " << batch.raw.size()
              << " values, not a multiple of nq + 3 nv = " << batch.stride() << "\n";
    return 1;
  }
  batch.size = int(batch.raw.size() / size_t(batch.stride()));
  const int B = batch.size, nv = model.nv;

  std::vector<Data> datas(size_t(args.threads), Data(model));
  Outputs out(B, nv);
  const std::vector<std::pair<std::string, ItemFn>> algorithms = {
      {"rnea", [&](Data& d, int i) {
         Eigen::Map<Eigen::VectorXd>(out.tau.data() + size_t(i) * nv, nv) =
             pinocchio::rnea(model, d, batch.q(i), batch.v(i), batch.a(i));
       }},
      {"aba", [&](Data& d, int i) {
         Eigen::Map<Eigen::VectorXd>(out.ddq.data() + size_t(i) * nv, nv) =
             pinocchio::aba(model, d, batch.q(i), batch.v(i), batch.tau(i));
       }},
      {"computeRNEADerivatives", [&](Data& d, int i) {
         pinocchio::computeRNEADerivatives(model, d, batch.q(i), batch.v(i), batch.a(i));
         store_gradient(out.did.data() + size_t(i) * nv * 2 * nv, d.dtau_dq, d.dtau_dv, nv);
       }},
      {"computeABADerivatives", [&](Data& d, int i) {
         pinocchio::computeABADerivatives(model, d, batch.q(i), batch.v(i), batch.tau(i));
         store_gradient(out.dfd.data() + size_t(i) * nv * 2 * nv, d.ddq_dq, d.ddq_dv, nv);
       }},
  };

  std::ostringstream json;
  json.precision(9);
  json << "{\"pinocchio\": \"" << PINOCCHIO_VERSION << "\", \"eigen\": \"" << EIGEN_WORLD_VERSION
       << "." << EIGEN_MAJOR_VERSION << "." << EIGEN_MINOR_VERSION << "\", \"nq\": " << model.nq
       << ", \"nv\": " << nv << ", \"batch\": " << B << ", \"threads\": " << args.threads
#ifdef _OPENMP
       << ", \"openmp\": true"
#else
       << ", \"openmp\": false"
#endif
       << ", \"results\": {";
  for (size_t k = 0; k < algorithms.size(); ++k) {
    const Timing t = time_passes(algorithms[k].second, datas, B, args);
    json << (k ? ", " : "") << "\"" << algorithms[k].first << "\": {\"ns_per_item\": "
         << t.median_s / B * 1e9 << ", \"min_ns_per_item\": " << t.min_s / B * 1e9
         << ", \"cpu_ns_per_item\": " << t.median_cpu_s / B * 1e9
         << ", \"min_cpu_ns_per_item\": " << t.min_cpu_s / B * 1e9 << ", \"reps\": " << t.reps
         << "}";
  }
  json << "}}";
  std::cout << json.str() << std::endl;

  if (!args.dump.empty()) {
    const int k = std::min(args.dump_items > 0 ? args.dump_items : B, B);
    std::ofstream dump(args.dump, std::ios::binary);
    const size_t g = size_t(nv) * 2 * nv;
    for (int i = 0; i < k; ++i) {
      dump.write(reinterpret_cast<const char*>(out.tau.data() + size_t(i) * nv), nv * 8);
      dump.write(reinterpret_cast<const char*>(out.ddq.data() + size_t(i) * nv), nv * 8);
      dump.write(reinterpret_cast<const char*>(out.did.data() + size_t(i) * g), long(g) * 8);
      dump.write(reinterpret_cast<const char*>(out.dfd.data() + size_t(i) * g), long(g) * 8);
    }
    if (!dump) {
      std::cerr << "pin_bench: could not write " << args.dump << "\n";
      return 1;
    }
  }
  return 0;
}
