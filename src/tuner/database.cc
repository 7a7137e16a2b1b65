// The tuning database: one SQLite file, WAL journal, one row per evaluated candidate.
//
// Durability: every insert is its own autocommit transaction with synchronous=FULL, so when
// insert() returns the row is in the WAL and fsync'd; a kill -9 (or a power cut) afterwards
// loses nothing, and a kill -9 during insert() loses at most that one candidate (SQLite's
// journal makes the transaction all-or-nothing). Candidates take seconds to evaluate, so the
// fsync per row costs nothing that matters.
//
// Identity: a file is ours when its header carries our application_id and it holds the
// `tactician_schema` table with exactly kSchemaVersion. A file that is not SQLite, an SQLite
// file of someone else, or one of another schema version is refused (never modified).
//
// Storage notes:
//  - `seed` (uint64) is stored as the int64 with the same bits (SQLite integers are signed).
//  - SQLite stores NaN as NULL; REAL columns read back NULL as NaN, so NaN round-trips.
//    Infinities round-trip; -0.0 reads back as +0.0 (SQLite stores integral reals as integers).
//  - Text is bound with its length, so any bytes (even NUL) round-trip.
//
// SQL text is only ever fixed literals; every value goes through sqlite3_bind_*.
#include "tuner/database.h"

#include "core/json.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

namespace tac::tuner {
namespace {

constexpr int kSchemaVersion = 1;
// 'TACT' in the SQLite header (PRAGMA application_id): marks the file as ours.
constexpr int kApplicationId = 0x54414354;
constexpr int kBusyTimeoutMs = 5000;

// Column order shared by every SELECT and by read_record().
#define TAC_CANDIDATE_COLUMNS                                                                  \
  "id, model_hash, device, tool_version, route, status, reason, strategy, seed, build_ms, " \
  "metrics_json, median_ms, p10_ms, p90_ms, cv, runs, threads, unix_time, evaluator"

constexpr const char* kCreateSchema =
    "CREATE TABLE tactician_schema (version INTEGER NOT NULL);"
    "CREATE TABLE candidates ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  model_hash TEXT NOT NULL, device TEXT NOT NULL, tool_version TEXT NOT NULL,"
    "  route TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL, strategy TEXT NOT NULL,"
    "  seed INTEGER NOT NULL, build_ms REAL, metrics_json TEXT NOT NULL,"
    "  median_ms REAL, p10_ms REAL, p90_ms REAL, cv REAL,"
    "  runs INTEGER NOT NULL, threads INTEGER NOT NULL, unix_time REAL, evaluator TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX candidates_by_key ON candidates (model_hash, device, tool_version, route);";
// Added without a schema-version change: files of the first layout get it on open, and a tool
// that does not know it ignores it.
constexpr const char* kCreateMeasurements =
    "CREATE TABLE IF NOT EXISTS measurements ("
    "  candidate_id INTEGER NOT NULL REFERENCES candidates(id), kind TEXT NOT NULL,"
    "  median_ms REAL, cv REAL, runs INTEGER NOT NULL, unix_time REAL);";
// Also added without a version change (distributed tuning): which evaluator ran the candidate.
// Files without the column get it on open (older rows: ''); older tools name their columns and
// never see it.
constexpr const char* kAddEvaluator = "ALTER TABLE candidates ADD COLUMN evaluator TEXT NOT NULL DEFAULT ''";

// Owns one prepared statement.
class Statement {
 public:
  Statement() = default;
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  sqlite3_stmt* get() const { return stmt_; }
  sqlite3_stmt** out() { return &stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// "<path>: <what>: <sqlite message>".
Status sqlite_error(const std::string& path, sqlite3* db, const std::string& what) {
  std::string msg = path + ": " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
  int code = db ? sqlite3_errcode(db) & 0xFF : 0;
  if ((code == SQLITE_CANTOPEN || code == SQLITE_IOERR) && sqlite3_system_errno(db) != 0)
    msg += std::string(" (") + std::strerror(sqlite3_system_errno(db)) + ")";
  return io_error(std::move(msg));
}

Status prepare(sqlite3* db, const std::string& path, const char* sql, Statement& st) {
  if (sqlite3_prepare_v2(db, sql, -1, st.out(), nullptr) != SQLITE_OK)
    return sqlite_error(path, db, "cannot prepare statement");
  return Status::ok();
}

// Runs a fixed SQL text (no parameters) to completion.
Status exec(sqlite3* db, const std::string& path, const char* sql, const char* what) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return sqlite_error(path, db, what);
  return Status::ok();
}

// Binds text with its length: embedded NULs and arbitrary bytes survive.
int bind_text(sqlite3_stmt* st, int index, const std::string& s) {
  return sqlite3_bind_text64(st, index, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}

std::string column_text(sqlite3_stmt* st, int index) {
  const void* p = sqlite3_column_blob(st, index);  // raw bytes, no conversion
  int n = sqlite3_column_bytes(st, index);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

double column_real(sqlite3_stmt* st, int index) {
  if (sqlite3_column_type(st, index) == SQLITE_NULL) return std::nan("");
  return sqlite3_column_double(st, index);
}

CandidateRecord read_record(sqlite3_stmt* st) {
  CandidateRecord r;
  r.id = sqlite3_column_int64(st, 0);
  r.model_hash = column_text(st, 1);
  r.device = column_text(st, 2);
  r.tool_version = column_text(st, 3);
  r.route = column_text(st, 4);
  r.status = column_text(st, 5);
  r.reason = column_text(st, 6);
  r.strategy = column_text(st, 7);
  r.seed = static_cast<uint64_t>(sqlite3_column_int64(st, 8));
  r.build_ms = column_real(st, 9);
  r.metrics_json = column_text(st, 10);
  r.median_ms = column_real(st, 11);
  r.p10_ms = column_real(st, 12);
  r.p90_ms = column_real(st, 13);
  r.cv = column_real(st, 14);
  r.runs = sqlite3_column_int(st, 15);
  r.threads = sqlite3_column_int(st, 16);
  r.unix_time = column_real(st, 17);
  r.evaluator = column_text(st, 18);
  return r;
}

// Steps a SELECT of TAC_CANDIDATE_COLUMNS to the end.
Result<std::vector<CandidateRecord>> read_all(sqlite3* db, const std::string& path, sqlite3_stmt* st) {
  std::vector<CandidateRecord> out;
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return sqlite_error(path, db, "cannot read candidates");
    out.push_back(read_record(st));
  }
}

enum class FileKind { fresh, ours, foreign };

struct Inspection {
  FileKind kind = FileKind::fresh;
  std::string why;  // for foreign
};

// Classifies the open file without modifying it. A non-SQLite file fails here (SQLITE_NOTADB).
Result<Inspection> inspect(sqlite3* db, const std::string& path) {
  Inspection in;
  int app_id = 0;
  {
    Statement st;
    TAC_RETURN_IF_ERROR(prepare(db, path, "PRAGMA application_id", st));
    if (sqlite3_step(st.get()) != SQLITE_ROW) return sqlite_error(path, db, "cannot read the file header");
    app_id = sqlite3_column_int(st.get(), 0);
  }
  bool has_schema = false, has_candidates = false, has_other = false;
  {
    Statement st;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, st.out(), nullptr) != SQLITE_OK)
      return sqlite_error(path, db, "cannot read the file as a tuning database");
    for (int rc; (rc = sqlite3_step(st.get())) != SQLITE_DONE;) {
      if (rc != SQLITE_ROW) return sqlite_error(path, db, "cannot read the file as a tuning database");
      std::string name = column_text(st.get(), 0);
      if (name == "tactician_schema") has_schema = true;
      else if (name == "candidates") has_candidates = true;
      else if (name.rfind("sqlite_", 0) != 0) has_other = true;
    }
  }
  if (app_id == 0 && !has_schema && !has_candidates && !has_other) return in;  // empty: ours to create
  if (app_id != kApplicationId) {
    in.kind = FileKind::foreign;
    in.why = app_id == 0 ? std::string("an SQLite file of another application (its tables are not Tactician's)")
                         : "an SQLite file of another application (application_id " + std::to_string(app_id) + ")";
  } else if (!has_schema || !has_candidates) {
    in.kind = FileKind::foreign;
    in.why = "marked as a tuning database but its tables are missing";
  } else {
    in.kind = FileKind::ours;
  }
  return in;
}

Status check_version(sqlite3* db, const std::string& path) {
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db, path, "SELECT version FROM tactician_schema", st));
  int rc = sqlite3_step(st.get());
  if (rc != SQLITE_ROW) {
    if (rc == SQLITE_DONE) return invalid_argument(path + ": not a usable Tactician tuning database (no schema version)");
    return sqlite_error(path, db, "cannot read the schema version");
  }
  int64_t version = sqlite3_column_int64(st.get(), 0);
  if (version != kSchemaVersion)
    return invalid_argument(path + ": tuning database has schema version " + std::to_string(version) +
                            ", this Tactician reads version " + std::to_string(kSchemaVersion) +
                            " (use another file, or move this one away)");
  return Status::ok();
}

// SQLite's "unable to open database file" hides which part failed; name the directory.
Status with_directory_hint(const Status& s, const std::string& path) {
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  std::string hint;
  if (!std::filesystem::exists(parent, ec)) hint = "directory '" + parent.string() + "' does not exist";
  else if (!std::filesystem::is_directory(parent, ec)) hint = "'" + parent.string() + "' is not a directory";
  else if (::access(parent.c_str(), W_OK) != 0) hint = "directory '" + parent.string() + "' is not writable";
  if (hint.empty()) return s;
  return Status(s.kind(), s.message() + "; " + hint);
}

// ---- JSON output ----

// Shortest round-trip form; NaN and infinities (not JSON) become null.
void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

// Strict RFC 8259 validator that also copies the value without insignificant whitespace
// (so a multi-line metrics document stays on one JSONL line).
class JsonMinifier {
 public:
  explicit JsonMinifier(std::string_view in) : in_(in) {}
  bool run(std::string& out) {
    skip_ws();
    if (!value(out, 0)) return false;
    skip_ws();
    return pos_ == in_.size();
  }

 private:
  static constexpr int kMaxDepth = 256;
  bool at(char c) const { return pos_ < in_.size() && in_[pos_] == c; }
  bool digit() const { return pos_ < in_.size() && in_[pos_] >= '0' && in_[pos_] <= '9'; }
  void skip_ws() {
    while (pos_ < in_.size() && (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\n' || in_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word, std::string& out) {
    if (in_.substr(pos_, word.size()) != word) return false;
    out.append(word);
    pos_ += word.size();
    return true;
  }
  bool value(std::string& out, int depth) {
    if (depth > kMaxDepth || pos_ >= in_.size()) return false;
    char c = in_[pos_];
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      out += c;
      ++pos_;
      skip_ws();
      if (at(close)) {
        out += close;
        ++pos_;
        return true;
      }
      for (;;) {
        skip_ws();
        if (c == '{') {
          if (!at('"') || !string(out)) return false;
          skip_ws();
          if (!at(':')) return false;
          out += ':';
          ++pos_;
          skip_ws();
        }
        if (!value(out, depth + 1)) return false;
        skip_ws();
        if (at(',')) {
          out += ',';
          ++pos_;
          continue;
        }
        if (!at(close)) return false;
        out += close;
        ++pos_;
        return true;
      }
    }
    if (c == '"') return string(out);
    if (c == 't') return literal("true", out);
    if (c == 'f') return literal("false", out);
    if (c == 'n') return literal("null", out);
    return number(out);
  }
  bool string(std::string& out) {
    size_t start = pos_++;
    while (pos_ < in_.size()) {
      unsigned char c = static_cast<unsigned char>(in_[pos_]);
      if (c == '"') {
        ++pos_;
        out.append(in_.substr(start, pos_ - start));
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++pos_ >= in_.size()) return false;
        char e = in_[pos_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k)
            if (pos_ + k >= in_.size() || !std::isxdigit(static_cast<unsigned char>(in_[pos_ + k]))) return false;
          pos_ += 5;
        } else if (std::strchr("\"\\/bfnrt", e) && e != '\0') {
          ++pos_;
        } else {
          return false;
        }
        continue;
      }
      size_t n = utf8_length(in_, pos_);
      if (n == 0) return false;
      pos_ += n;
    }
    return false;
  }
  bool number(std::string& out) {
    size_t start = pos_;
    if (at('-')) ++pos_;
    if (at('0')) {
      ++pos_;
    } else if (digit()) {
      while (digit()) ++pos_;
    } else {
      return false;
    }
    if (at('.')) {
      ++pos_;
      if (!digit()) return false;
      while (digit()) ++pos_;
    }
    if (at('e') || at('E')) {
      ++pos_;
      if (at('+') || at('-')) ++pos_;
      if (!digit()) return false;
      while (digit()) ++pos_;
    }
    out.append(in_.substr(start, pos_ - start));
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

// One record as one line of JSON. `metrics` holds metrics_json embedded as a JSON value when it
// is valid JSON (minified), null when it is empty, and a JSON string of the raw text otherwise.
std::string record_to_json(const CandidateRecord& r) {
  std::string j = "{\"id\":" + std::to_string(r.id);
  auto field = [&](const char* key, const std::string& v) {
    j += ",\"";
    j += key;
    j += "\":";
    append_json_string(j, v);
  };
  auto number = [&](const char* key, double v) {
    j += ",\"";
    j += key;
    j += "\":";
    append_json_number(j, v);
  };
  field("model_hash", r.model_hash);
  field("device", r.device);
  field("tool_version", r.tool_version);
  field("route", r.route);
  field("status", r.status);
  field("reason", r.reason);
  field("strategy", r.strategy);
  j += ",\"seed\":" + std::to_string(r.seed);
  number("build_ms", r.build_ms);
  j += ",\"metrics\":";
  std::string metrics;
  if (r.metrics_json.empty()) j += "null";
  else if (JsonMinifier(r.metrics_json).run(metrics)) j += metrics;
  else append_json_string(j, r.metrics_json);
  number("median_ms", r.median_ms);
  number("p10_ms", r.p10_ms);
  number("p90_ms", r.p90_ms);
  number("cv", r.cv);
  j += ",\"runs\":" + std::to_string(r.runs);
  j += ",\"threads\":" + std::to_string(r.threads);
  number("unix_time", r.unix_time);
  field("evaluator", r.evaluator);
  j += '}';
  return j;
}

}  // namespace

Result<std::unique_ptr<Database>> Database::open(const std::string& path) {
  if (path.empty()) return invalid_argument("tuning database: empty path");
  std::unique_ptr<Database> d(new Database());
  d->path_ = path;
  int rc = sqlite3_open_v2(path.c_str(), &d->db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) return with_directory_hint(sqlite_error(path, d->db_, "cannot open tuning database"), path);
  sqlite3* db = d->db_;
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  // SQLite silently falls back to read-only when the file is not writable.
  if (sqlite3_db_readonly(db, "main") == 1)
    return io_error(path + ": tuning database is read-only (it must be writable)");

  auto refuse = [&](const Status& why) {
    if (why.kind() == ErrorKind::io_error) {
      int code = sqlite3_errcode(db) & 0xFF;
      if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
        return invalid_argument(path + ": not a Tactician tuning database (" + sqlite3_errmsg(db) + ")");
    }
    return why;
  };

  Result<Inspection> first = inspect(db, path);
  if (!first) return refuse(first.status());
  if (first->kind == FileKind::foreign) return invalid_argument(path + ": not a Tactician tuning database: " + first->why);
  if (first->kind == FileKind::ours) TAC_RETURN_IF_ERROR(check_version(db, path));

  if (path != ":memory:") {
    Statement st;
    TAC_RETURN_IF_ERROR(prepare(db, path, "PRAGMA journal_mode = WAL", st));
    if (sqlite3_step(st.get()) != SQLITE_ROW) return refuse(sqlite_error(path, db, "cannot switch to WAL journal"));
    std::string mode = column_text(st.get(), 0);
    if (mode != "wal") return io_error(path + ": cannot switch to WAL journal (journal mode is '" + mode + "')");
  }
  TAC_RETURN_IF_ERROR(exec(db, path, "PRAGMA synchronous = FULL", "cannot set synchronous mode"));

  if (first->kind == FileKind::fresh) {
    // Create under the write lock; another process may have created it since we looked.
    TAC_RETURN_IF_ERROR(exec(db, path, "BEGIN IMMEDIATE", "cannot lock the database to create it"));
    Result<Inspection> again = inspect(db, path);
    Status s = again.status();
    if (s.is_ok() && again->kind == FileKind::foreign)
      s = invalid_argument(path + ": not a Tactician tuning database: " + again->why);
    if (s.is_ok() && again->kind == FileKind::ours) s = check_version(db, path);
    if (s.is_ok() && again->kind == FileKind::fresh) {
      s = exec(db, path, kCreateSchema, "cannot create the tuning database schema");
      Statement st;
      if (s.is_ok()) s = prepare(db, path, "INSERT INTO tactician_schema (version) VALUES (?1)", st);
      if (s.is_ok()) {
        sqlite3_bind_int(st.get(), 1, kSchemaVersion);
        if (sqlite3_step(st.get()) != SQLITE_DONE) s = sqlite_error(path, db, "cannot write the schema version");
      }
      // application_id is a header field; the pragma takes no bound parameter. Fixed literal.
      if (s.is_ok()) s = exec(db, path, "PRAGMA application_id = 1413563220", "cannot mark the file");
      static_assert(kApplicationId == 1413563220, "keep the literal above in sync");
    }
    if (!s.is_ok()) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return s;
    }
    TAC_RETURN_IF_ERROR(exec(db, path, "COMMIT", "cannot commit the new schema"));
  }
  TAC_RETURN_IF_ERROR(exec(db, path, kCreateMeasurements, "cannot create the measurements table"));
  {
    Statement st;
    TAC_RETURN_IF_ERROR(prepare(db, path, "SELECT count(*) FROM pragma_table_info('candidates') WHERE name = 'evaluator'", st));
    if (sqlite3_step(st.get()) != SQLITE_ROW) return sqlite_error(path, db, "cannot read the candidates' columns");
    if (sqlite3_column_int(st.get(), 0) == 0)
      TAC_RETURN_IF_ERROR(exec(db, path, kAddEvaluator, "cannot add the evaluator column"));
  }
  return d;
}

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

Result<int64_t> Database::insert(const CandidateRecord& r) {
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db_, path_,
                              "INSERT INTO candidates (model_hash, device, tool_version, route, status, reason, "
                              "strategy, seed, build_ms, metrics_json, median_ms, p10_ms, p90_ms, cv, runs, threads, "
                              "unix_time, evaluator) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                              "?14, ?15, ?16, ?17, ?18)",
                              st));
  sqlite3_stmt* s = st.get();
  int rc = SQLITE_OK;
  auto ok = [&](int r2) { rc = rc == SQLITE_OK ? r2 : rc; };
  ok(bind_text(s, 1, r.model_hash));
  ok(bind_text(s, 2, r.device));
  ok(bind_text(s, 3, r.tool_version));
  ok(bind_text(s, 4, r.route));
  ok(bind_text(s, 5, r.status));
  ok(bind_text(s, 6, r.reason));
  ok(bind_text(s, 7, r.strategy));
  ok(sqlite3_bind_int64(s, 8, static_cast<sqlite3_int64>(r.seed)));
  ok(sqlite3_bind_double(s, 9, r.build_ms));  // NaN binds as NULL
  ok(bind_text(s, 10, r.metrics_json));
  ok(sqlite3_bind_double(s, 11, r.median_ms));
  ok(sqlite3_bind_double(s, 12, r.p10_ms));
  ok(sqlite3_bind_double(s, 13, r.p90_ms));
  ok(sqlite3_bind_double(s, 14, r.cv));
  ok(sqlite3_bind_int(s, 15, r.runs));
  ok(sqlite3_bind_int(s, 16, r.threads));
  ok(sqlite3_bind_double(s, 17, r.unix_time));
  ok(bind_text(s, 18, r.evaluator));
  if (rc != SQLITE_OK) return sqlite_error(path_, db_, "cannot bind candidate");
  // Autocommit: the statement is its own transaction, durable when step returns DONE.
  if (sqlite3_step(s) != SQLITE_DONE) return sqlite_error(path_, db_, "cannot insert candidate");
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

Status Database::add_measurement(const Measurement& m) {
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db_, path_,
                              "INSERT INTO measurements (candidate_id, kind, median_ms, cv, runs, unix_time) "
                              "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                              st));
  sqlite3_stmt* s = st.get();
  int rc = sqlite3_bind_int64(s, 1, m.candidate_id);
  if (rc == SQLITE_OK) rc = bind_text(s, 2, m.kind);
  if (rc == SQLITE_OK) rc = sqlite3_bind_double(s, 3, m.median_ms);
  if (rc == SQLITE_OK) rc = sqlite3_bind_double(s, 4, m.cv);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(s, 5, m.runs);
  if (rc == SQLITE_OK) rc = sqlite3_bind_double(s, 6, m.unix_time);
  if (rc != SQLITE_OK) return sqlite_error(path_, db_, "cannot bind measurement");
  if (sqlite3_step(s) != SQLITE_DONE) return sqlite_error(path_, db_, "cannot insert measurement");
  return Status::ok();
}

Result<std::vector<Measurement>> Database::measurements() {
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db_, path_,
                              "SELECT candidate_id, kind, median_ms, cv, runs, unix_time FROM measurements ORDER BY rowid",
                              st));
  std::vector<Measurement> out;
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    Measurement m;
    m.candidate_id = sqlite3_column_int64(st.get(), 0);
    m.kind = column_text(st.get(), 1);
    m.median_ms = column_real(st.get(), 2);
    m.cv = column_real(st.get(), 3);
    m.runs = sqlite3_column_int(st.get(), 4);
    m.unix_time = column_real(st.get(), 5);
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return sqlite_error(path_, db_, "cannot read measurements");
  return out;
}

// When a route was recorded more than once (a re-measurement), the most recent record wins.
Result<std::optional<CandidateRecord>> Database::find(const std::string& model_hash, const std::string& device,
                                                      const std::string& tool_version, const std::string& route) {
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db_, path_,
                              "SELECT " TAC_CANDIDATE_COLUMNS
                              " FROM candidates WHERE model_hash = ?1 AND device = ?2 AND tool_version = ?3 "
                              "AND route = ?4 ORDER BY id DESC LIMIT 1",
                              st));
  bind_text(st.get(), 1, model_hash);
  bind_text(st.get(), 2, device);
  bind_text(st.get(), 3, tool_version);
  bind_text(st.get(), 4, route);
  int rc = sqlite3_step(st.get());
  if (rc == SQLITE_DONE) return std::optional<CandidateRecord>();
  if (rc != SQLITE_ROW) return sqlite_error(path_, db_, "cannot look up candidate");
  return std::optional<CandidateRecord>(read_record(st.get()));
}

Result<std::vector<CandidateRecord>> Database::all(const std::string& model_hash, const std::string& device,
                                                   const std::string& tool_version) {
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db_, path_,
                              "SELECT " TAC_CANDIDATE_COLUMNS
                              " FROM candidates WHERE model_hash = ?1 AND device = ?2 AND tool_version = ?3 "
                              "ORDER BY id",
                              st));
  bind_text(st.get(), 1, model_hash);
  bind_text(st.get(), 2, device);
  bind_text(st.get(), 3, tool_version);
  return read_all(db_, path_, st.get());
}

Result<std::vector<CandidateRecord>> Database::everything() {
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db_, path_, "SELECT " TAC_CANDIDATE_COLUMNS " FROM candidates ORDER BY id", st));
  return read_all(db_, path_, st.get());
}

Status Database::export_jsonl(const std::string& path) {
  TAC_ASSIGN_OR_RETURN(std::vector<CandidateRecord> records, everything());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return io_error(path + ": cannot write JSONL export: " + std::strerror(errno));
  bool ok = true;
  for (const CandidateRecord& r : records) {
    std::string line = record_to_json(r);
    line += '\n';
    ok = ok && std::fwrite(line.data(), 1, line.size(), f) == line.size();
  }
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) return io_error(path + ": cannot write JSONL export: " + std::strerror(err));
  return Status::ok();
}

}  // namespace tac::tuner
