// SPDX-License-Identifier: GPL-2.0-or-later
// One Codec per format decodes one compressed stream (a gzip member, an xz stream, a zstd or lz4
// frame, a bzip2 stream); the reader around it feeds it, goes on to the next stream when the file
// holds several (as `cat a.gz b.gz` makes), and turns a short or corrupt input into a message.
#include "input/decompress.hpp"

#include <bzlib.h>
#include <lz4frame.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace iscsi_doctor::cli {
namespace {

constexpr size_t kInput = 256 * 1024;                     // compressed bytes read at once
constexpr size_t kOutput = 256 * 1024;                    // the FILE*'s buffer: decompressed bytes per call
constexpr size_t kMaxChunk = 1u << 30;                    // zlib and libbz2 count in unsigned int
constexpr uint64_t kXzMemoryLimit = uint64_t(256) << 20;  // xz -9 needs 65 MiB

bool starts(const uint8_t* b, size_t n, std::initializer_list<uint8_t> magic) {
  return n >= magic.size() && std::equal(magic.begin(), magic.end(), b);
}

// zstd and lz4 frames may be separated by skippable frames (magic 0x184D2A50-5F).
bool skippable_frame(const uint8_t* b, size_t n) {
  return n >= 4 && (b[0] & 0xf0) == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18;
}

struct Buffers {
  const uint8_t* in;
  size_t in_left;
  uint8_t* out;
  size_t out_left;
  void advance(size_t used, size_t made) {
    in += used;
    in_left -= used;
    out += made;
    out_left -= made;
  }
};

class Codec {
public:
  enum class Step { more, end, error };  // more: call again, with more input or output room
  explicit Codec(std::string_view name) : name(name) {}
  virtual ~Codec() = default;
  virtual Step step(Buffers&) = 0;
  virtual bool restart() = 0;  // ready for another stream after `end`
  const std::string_view name;
  bool ok = false;  // the library's decoder started
  std::string why;  // after `error`: the whole message

protected:
  Step corrupt(std::string_view what) {
    why = fmt::format("corrupt {} data ({})", name, what);
    return Step::error;
  }
};

class Gzip final : public Codec {
public:
  Gzip() : Codec("gzip") { ok = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK; }
  ~Gzip() override {
    if (ok) inflateEnd(&z_);
  }
  bool restart() override { return inflateReset(&z_) == Z_OK; }
  Step step(Buffers& b) override {
    z_.next_in = const_cast<Bytef*>(b.in);
    z_.avail_in = uInt(std::min(b.in_left, kMaxChunk));
    z_.next_out = b.out;
    z_.avail_out = uInt(std::min(b.out_left, kMaxChunk));
    const uInt in0 = z_.avail_in, out0 = z_.avail_out;
    const int rc = inflate(&z_, Z_NO_FLUSH);
    b.advance(in0 - z_.avail_in, out0 - z_.avail_out);
    if (rc == Z_STREAM_END) return Step::end;
    if (rc == Z_OK || rc == Z_BUF_ERROR) return Step::more;
    return corrupt(z_.msg ? z_.msg : "inflate failed");
  }

private:
  z_stream z_{};
};

class Xz final : public Codec {
public:
  Xz() : Codec("xz") { ok = restart(); }
  ~Xz() override { lzma_end(&s_); }
  bool restart() override { return lzma_stream_decoder(&s_, kXzMemoryLimit, 0) == LZMA_OK; }
  Step step(Buffers& b) override {
    s_.next_in = b.in;
    s_.avail_in = b.in_left;
    s_.next_out = b.out;
    s_.avail_out = b.out_left;
    const lzma_ret rc = lzma_code(&s_, LZMA_RUN);
    b.advance(b.in_left - s_.avail_in, b.out_left - s_.avail_out);
    switch (rc) {
      case LZMA_OK:
      case LZMA_BUF_ERROR:  // no progress: the reader sees it too
        return Step::more;
      case LZMA_STREAM_END:
        return Step::end;
      case LZMA_MEMLIMIT_ERROR:
        why = fmt::format("xz data needs more than {} MiB of memory to decompress", kXzMemoryLimit >> 20);
        return Step::error;
      case LZMA_DATA_ERROR:
        return corrupt("compressed data is corrupt");
      case LZMA_FORMAT_ERROR:
        return corrupt("not in the xz format");
      case LZMA_OPTIONS_ERROR:
        return corrupt("unsupported compression options");
      case LZMA_MEM_ERROR:
        return corrupt("out of memory");
      default:
        return corrupt(fmt::format("liblzma error {}", int(rc)));
    }
  }

private:
  lzma_stream s_{};  // LZMA_STREAM_INIT: all zero
};

// libzstd and liblz4 do not count the bytes a failing call wrote, so a bad checksum would lose the
// last block's packets. Fed only the input they ask for next (the rest of a block and the next
// header), each call decodes at most one block and meets the checksum alone (with Reader::held).
class Zstd final : public Codec {
public:
  Zstd() : Codec("zstd"), d_(ZSTD_createDStream()) { ok = d_ != nullptr; }
  ~Zstd() override { ZSTD_freeDStream(d_); }
  bool restart() override {
    hint_ = 1;
    return !ZSTD_isError(ZSTD_DCtx_reset(d_, ZSTD_reset_session_only));
  }
  Step step(Buffers& b) override {
    ZSTD_inBuffer in{b.in, std::min(b.in_left, hint_), 0};
    ZSTD_outBuffer out{b.out, b.out_left, 0};
    const size_t rc = ZSTD_decompressStream(d_, &out, &in);
    if (!ZSTD_isError(rc)) {
      b.advance(in.pos, out.pos);
      hint_ = rc == 0 ? 1 : rc;
      return rc == 0 ? Step::end : Step::more;  // 0: a frame decoded and flushed
    }
    if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge) {
      // libzstd's default bound on memory (128 MiB), which zstd --long=28 and above exceed
      why = "zstd data needs a window larger than 128 MiB to decompress";
      return Step::error;
    }
    return corrupt(ZSTD_getErrorName(rc));
  }

private:
  ZSTD_DStream* d_;
  size_t hint_ = 1;  // the input it asks for next (why: above)
};

class Lz4 final : public Codec {
public:
  Lz4() : Codec("lz4") { ok = !LZ4F_isError(LZ4F_createDecompressionContext(&d_, LZ4F_VERSION)); }
  ~Lz4() override { LZ4F_freeDecompressionContext(d_); }
  bool restart() override {  // a finished frame leaves the context ready for the next
    hint_ = 1;
    return true;
  }
  Step step(Buffers& b) override {
    size_t used = std::min(b.in_left, hint_), made = b.out_left;
    const size_t rc = LZ4F_decompress(d_, b.out, &made, b.in, &used, nullptr);
    if (!LZ4F_isError(rc)) {
      b.advance(used, made);
      hint_ = rc == 0 ? 1 : rc;
      return rc == 0 ? Step::end : Step::more;  // 0: a frame decoded and flushed
    }
    std::string_view name = LZ4F_getErrorName(rc);  // "ERROR_contentChecksum_invalid"
    if (name.starts_with("ERROR_")) name.remove_prefix(6);
    return corrupt(name);
  }

private:
  LZ4F_dctx* d_ = nullptr;
  size_t hint_ = 1;  // the input it asks for next (why: above Zstd)
};

class Bzip2 final : public Codec {
public:
  Bzip2() : Codec("bzip2") { ok = restart(); }
  ~Bzip2() override {
    if (ok) BZ2_bzDecompressEnd(&s_);
  }
  bool restart() override {
    if (ok) BZ2_bzDecompressEnd(&s_);
    s_ = bz_stream{};
    ok = BZ2_bzDecompressInit(&s_, 0, 0) == BZ_OK;
    return ok;
  }
  Step step(Buffers& b) override {
    s_.next_in = const_cast<char*>(reinterpret_cast<const char*>(b.in));
    s_.avail_in = unsigned(std::min(b.in_left, kMaxChunk));
    s_.next_out = reinterpret_cast<char*>(b.out);
    s_.avail_out = unsigned(std::min(b.out_left, kMaxChunk));
    const unsigned in0 = s_.avail_in, out0 = s_.avail_out;
    const int rc = BZ2_bzDecompress(&s_);
    b.advance(in0 - s_.avail_in, out0 - s_.avail_out);
    if (rc == BZ_STREAM_END) return Step::end;
    if (rc == BZ_OK) return Step::more;
    return corrupt(rc == BZ_DATA_ERROR         ? "data integrity error"
                   : rc == BZ_DATA_ERROR_MAGIC ? "bad magic number"
                   : rc == BZ_MEM_ERROR        ? "out of memory"
                                               : fmt::format("libbz2 error {}", rc));
  }

private:
  bz_stream s_{};
};

std::unique_ptr<Codec> make_codec(Compression c) {
  switch (c) {
    case Compression::gzip:
      return std::make_unique<Gzip>();
    case Compression::xz:
      return std::make_unique<Xz>();
    case Compression::zstd:
      return std::make_unique<Zstd>();
    case Compression::lz4:
      return std::make_unique<Lz4>();
    case Compression::bzip2:
      return std::make_unique<Bzip2>();
    default:
      return nullptr;
  }
}

// The fopencookie side: compressed bytes from src through the codec.
struct Reader {
  FILE* src = nullptr;  // owned
  Compression kind = Compression::none;
  std::unique_ptr<Codec> codec;
  std::shared_ptr<DecompressStatus> status;
  std::vector<uint8_t> in = std::vector<uint8_t>(kInput);
  std::vector<char> stdio_buffer = std::vector<char>(kOutput);  // glibc sizes a buffer it makes at 8 KiB
  size_t in_pos = 0, in_end = 0;                                // unread: in[in_pos, in_end)
  bool src_end = false;
  bool stream_ended = false;  // the codec's stream ended: another may follow
  bool held = false;          // the last step filled its output: the codec may hold decoded bytes
  bool finished = false;

  // More compressed bytes after the unread ones; false at the source's end (or on a read error).
  bool refill() {
    if (src_end) return false;
    std::memmove(in.data(), in.data() + in_pos, in_end - in_pos);
    in_end -= in_pos;
    in_pos = 0;
    const size_t n = std::fread(in.data() + in_end, 1, in.size() - in_end, src);
    if (n == 0) {
      src_end = true;
      if (std::ferror(src))
        status->error = fmt::format("{} data unreadable: {}", codec->name, std::strerror(errno));
      return false;
    }
    in_end += n;
    status->consumed += n;
    return true;
  }

  // After the end of a stream: zero bytes (padding, as dd and xz leave) up to the end, or another
  // stream of the same format. Anything else is told and left unread, as zcat does.
  bool next_stream() {
    for (;;) {
      while (in_pos < in_end && in[in_pos] == 0)
        ++in_pos;
      if (in_pos < in_end) break;
      if (!refill()) return false;
    }
    while (in_end - in_pos < kMagicBytes && refill()) {
    }
    const uint8_t* b = in.data() + in_pos;
    const size_t n = in_end - in_pos;
    const bool frames = kind == Compression::zstd || kind == Compression::lz4;
    if (compression_of(b, n) == kind || (frames && skippable_frame(b, n))) {
      if (codec->restart()) return true;
      status->error = fmt::format("cannot decompress: the {} decoder failed to restart", codec->name);
      return false;
    }
    status->warning = fmt::format("the bytes after the end of the {} data are not {} data: ignored",
                                  codec->name, codec->name);
    return false;
  }

  // Fills out as far as the input read so far goes, then returns rather than wait for more: a
  // stream's packets go on as they come. Corrupt data is a read error (-1) once the bytes before it
  // are handed on; an early end is an end of file, so that libpcap tells whether it cut a record.
  ssize_t read(uint8_t* out, size_t size) {
    Buffers b{nullptr, 0, out, std::min(size, kMaxChunk)};
    const size_t want = b.out_left;
    bool failed = false;
    while (!finished && b.out_left > 0) {
      const bool some = b.out_left != want;
      if (some && (in_pos == in_end || stream_ended)) break;
      if (stream_ended) {
        stream_ended = false;
        if (!next_stream()) {
          finished = true;
          break;
        }
      }
      if (in_pos == in_end) refill();  // at the end of the source, the codec may still hold output
      // Held bytes are handed on before any input is given: an error in the input must not take them.
      const bool flush = held;
      b.in = in.data() + in_pos;
      b.in_left = flush ? 0 : in_end - in_pos;
      const size_t in0 = b.in_left, out0 = b.out_left;
      const Codec::Step step = codec->step(b);
      in_pos += in0 - b.in_left;
      held = b.out_left == 0;
      if (step == Codec::Step::error) {
        status->error = codec->why;
        finished = failed = true;
      } else if (step == Codec::Step::end) {
        stream_ended = true;
      } else if (flush || b.in_left != in0 || b.out_left != out0) {
        // progress, or nothing was held: go on
      } else if (some) {
        break;
      } else if (!refill()) {             // it needs more input
        failed = !status->error.empty();  // unreadable source
        if (!failed) status->error = fmt::format("{} stream truncated (unexpected end of file)", codec->name);
        finished = true;
      }
    }
    if (failed && b.out_left == want) {
      errno = EIO;
      return -1;
    }
    return ssize_t(want - b.out_left);
  }
};

ssize_t reader_read(void* cookie, char* buf, size_t size) {
  return static_cast<Reader*>(cookie)->read(reinterpret_cast<uint8_t*>(buf), size);
}

int reader_close(void* cookie) {
  auto* r = static_cast<Reader*>(cookie);
  const int rc = std::fclose(r->src);
  delete r;
  return rc;
}

}  // namespace

Compression compression_of(const uint8_t* b, size_t n) {
  if (starts(b, n, {0x1f, 0x8b})) return Compression::gzip;
  if (starts(b, n, {0xfd, '7', 'z', 'X', 'Z', 0x00})) return Compression::xz;
  if (starts(b, n, {0x28, 0xb5, 0x2f, 0xfd})) return Compression::zstd;
  if (starts(b, n, {0x04, 0x22, 0x4d, 0x18})) return Compression::lz4;
  if (starts(b, n, {'B', 'Z', 'h'}) && n >= 4 && b[3] >= '1' && b[3] <= '9') return Compression::bzip2;
  return Compression::none;
}

std::string_view compression_name(Compression c) {
  switch (c) {
    case Compression::gzip:
      return "gzip";
    case Compression::xz:
      return "xz";
    case Compression::zstd:
      return "zstd";
    case Compression::lz4:
      return "lz4";
    case Compression::bzip2:
      return "bzip2";
    default:
      return "none";
  }
}

FILE* decompressed_file(Compression c, FILE* src, std::shared_ptr<DecompressStatus> status) {
  auto r = std::make_unique<Reader>();
  r->codec = make_codec(c);
  if (!r->codec || !r->codec->ok) {
    std::fclose(src);
    return nullptr;
  }
  r->src = src;
  r->kind = c;
  r->status = std::move(status);
  FILE* f = fopencookie(r.get(), "r", cookie_io_functions_t{reader_read, nullptr, nullptr, reader_close});
  if (!f) {
    std::fclose(src);
    return nullptr;
  }
  // Large calls (each one costs the codec a pass through its slow path). fclose does not touch a
  // buffer it was given after reader_close has freed it.
  setvbuf(f, r->stdio_buffer.data(), _IOFBF, r->stdio_buffer.size());
  r.release();
  return f;
}

}  // namespace iscsi_doctor::cli
