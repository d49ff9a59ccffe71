// SPDX-License-Identifier: GPL-2.0-or-later
#include "commands/spool.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace iscsi_doctor::cli {
namespace {

// Every field of a CommandResult and of a Finding (results.hpp), in one list that both writes and
// reads them (a field added there is added here, once).
template <typename Command, typename Visit>
void command_fields(Command& c, Visit&& f) {
  f(c.session), f(c.connection), f(c.itt), f(c.cmdsn), f(c.lun), f(c.iscsi_opcode), f(c.op), f(c.kind), f(c.lba);
  f(c.bytes), f(c.first_frame), f(c.status_frame), f(c.first_ns), f(c.status_ns), f(c.latency_ms);
  f(c.round_trips), f(c.ideal_round_trips), f(c.scsi_status), f(c.iscsi_response), f(c.sense_key);
  f(c.asc), f(c.ascq), f(c.findings), f(c.breakdown), f(c.completed), f(c.data_incomplete);
}
template <typename Found, typename Visit>
void finding_fields(Found& x, Visit&& f) {
  f(x.kind), f(x.side), f(x.session), f(x.connection), f(x.frame), f(x.related), f(x.lost_ms), f(x.itt);
  f(x.command_first_frame), f(x.detail), f(x.inferred);
}

struct SpoolWriter {
  FILE* f;
  template <typename T>
  void operator()(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::fwrite(&v, sizeof v, 1, f);
  }
  void operator()(const std::string& s) {
    (*this)(uint32_t(s.size()));
    std::fwrite(s.data(), 1, s.size(), f);
  }
  template <typename T>
  void operator()(const std::vector<T>& v) {
    (*this)(uint32_t(v.size()));
    for (const T& x : v)
      (*this)(x);
  }
  template <typename A, typename B>
  void operator()(const std::pair<A, B>& p) {
    (*this)(p.first), (*this)(p.second);
  }
};

struct SpoolReader {
  FILE* f;
  bool ok = true;
  template <typename T>
  void operator()(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    ok = ok && std::fread(&v, sizeof v, 1, f) == 1;
  }
  void operator()(std::string& s) {
    uint32_t n = 0;
    (*this)(n);
    s.resize(ok ? n : 0);
    ok = ok && std::fread(s.data(), 1, n, f) == n;
  }
  template <typename T>
  void operator()(std::vector<T>& v) {
    uint32_t n = 0;
    (*this)(n);
    for (uint32_t i = 0; ok && i < n; ++i)
      (*this)(v.emplace_back());
  }
  template <typename A, typename B>
  void operator()(std::pair<A, B>& p) {
    (*this)(p.first), (*this)(p.second);
  }
};

}  // namespace

void record(FILE* f, const CommandResult& c) {
  SpoolWriter w{f};
  w('C');
  command_fields(c, w);
}

void record(FILE* f, const Finding& x) {
  SpoolWriter w{f};
  w('F');
  finding_fields(x, w);
}

void replay(FILE* f, Sink& sink) {
  std::fflush(f);
  std::rewind(f);
  SpoolReader r{f};
  char tag;
  while (std::fread(&tag, 1, 1, f) == 1) {
    if (tag == 'C') {
      CommandResult c;
      command_fields(c, r);
      if (r.ok) sink.on_command(c);
    } else {
      Finding x;
      finding_fields(x, r);
      if (r.ok) sink.on_finding(x);
    }
    if (!r.ok) throw std::runtime_error("temporary file read back short");
  }
}

}  // namespace iscsi_doctor::cli
