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
// Reading (issue 30): every value read back is input. read_record checks that each column holds
// the storage class insert() writes there; validate_candidate checks that the values make sense
// as a candidate; report, explain and a resuming tune leave out (and name) the rows that fail.
//
// SQL text is only ever fixed literals; every value goes through sqlite3_bind_*.
#include "tuner/database.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "builder/knobs.h"
#include "core/json.h"
#include "tuner/accuracy.h"

namespace fs = std::filesystem;

namespace tac::tuner {
namespace {

constexpr int kSchemaVersion = 1;
// 'TACT' in the SQLite header (PRAGMA application_id): marks the file as ours.
constexpr int kApplicationId = 0x54414354;
constexpr int kBusyTimeoutMs = 5000;

// Column order shared by every SELECT and by read_record(). A read-only file of the first layout
// has no evaluator column: its rows read as evaluated in one process ('').
#define TAC_CANDIDATE_COLUMNS_BUT_EVALUATOR                                                    \
  "id, model_hash, device, tool_version, route, status, reason, strategy, seed, build_ms, " \
  "metrics_json, median_ms, p10_ms, p90_ms, cv, runs, threads, unix_time, "
constexpr const char* kCandidateColumns = TAC_CANDIDATE_COLUMNS_BUT_EVALUATOR "evaluator";
constexpr const char* kCandidateColumnsOld = TAC_CANDIDATE_COLUMNS_BUT_EVALUATOR "'' AS evaluator";

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

// `s` for a message: control bytes escaped, at most `limit` bytes shown.
std::string printable(const std::string& s, size_t limit = 80) {
  std::string o;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  if (s.size() > limit) o += "...";
  return o;
}

// Reads one row's columns, checking that each holds the storage class insert() writes there. The
// first mismatch is kept (why()); reads after it return empty values.
class RowReader {
 public:
  explicit RowReader(sqlite3_stmt* st) : st_(st) {}
  const std::string& why() const { return why_; }

  std::string text(int i, const char* name) {
    if (const int t = sqlite3_column_type(st_, i); t != SQLITE_TEXT) {
      wrong(i, name, "text");
      return {};
    }
    return column_text(st_, i);
  }
  // A REAL column: a float, an integer (SQLite stores integral reals so) or NULL (NaN, see above).
  double real(int i, const char* name) {
    const int t = sqlite3_column_type(st_, i);
    if (t == SQLITE_NULL) return std::nan("");
    if (t == SQLITE_FLOAT || t == SQLITE_INTEGER) return sqlite3_column_double(st_, i);
    wrong(i, name, "a number");
    return 0;
  }
  int64_t integer(int i, const char* name, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
    if (sqlite3_column_type(st_, i) != SQLITE_INTEGER) {
      wrong(i, name, "an integer");
      return 0;
    }
    const int64_t v = sqlite3_column_int64(st_, i);
    if (v < lo || v > hi) {
      fail(std::string("column '") + name + "' holds " + std::to_string(v) + ", out of range [" + std::to_string(lo) +
           ", " + std::to_string(hi) + "]");
      return 0;
    }
    return v;
  }

 private:
  void fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
  }
  void wrong(int i, const char* name, const char* wanted) {
    const int t = sqlite3_column_type(st_, i);
    std::string held = t == SQLITE_NULL    ? std::string("NULL")
                       : t == SQLITE_TEXT  ? "text '" + printable(column_text(st_, i), 40) + "'"
                       : t == SQLITE_BLOB  ? "a blob of " + std::to_string(sqlite3_column_bytes(st_, i)) + " bytes"
                       : t == SQLITE_FLOAT ? "the real number " + std::to_string(sqlite3_column_double(st_, i))
                                           : "the integer " + std::to_string(sqlite3_column_int64(st_, i));
    fail(std::string("column '") + name + "' holds " + held + ", not " + wanted);
  }

  sqlite3_stmt* st_;
  std::string why_;
};

// One row of kCandidateColumns; an error (why, without the path) when a column holds what
// insert() never writes. `route_out` gets the route column's bytes whatever else is wrong.
Result<CandidateRecord> read_record(sqlite3_stmt* st, int64_t& id_out, std::string& route_out) {
  RowReader rd(st);
  CandidateRecord r;
  r.id = rd.integer(0, "id");
  id_out = r.id;
  route_out = column_text(st, 4);
  r.model_hash = rd.text(1, "model_hash");
  r.device = rd.text(2, "device");
  r.tool_version = rd.text(3, "tool_version");
  r.route = rd.text(4, "route");
  r.status = rd.text(5, "status");
  r.reason = rd.text(6, "reason");
  r.strategy = rd.text(7, "strategy");
  r.seed = static_cast<uint64_t>(rd.integer(8, "seed"));
  r.build_ms = rd.real(9, "build_ms");
  r.metrics_json = rd.text(10, "metrics_json");
  r.median_ms = rd.real(11, "median_ms");
  r.p10_ms = rd.real(12, "p10_ms");
  r.p90_ms = rd.real(13, "p90_ms");
  r.cv = rd.real(14, "cv");
  r.runs = static_cast<int>(rd.integer(15, "runs", INT_MIN, INT_MAX));
  r.threads = static_cast<int>(rd.integer(16, "threads", INT_MIN, INT_MAX));
  r.unix_time = rd.real(17, "unix_time");
  r.evaluator = rd.text(18, "evaluator");
  if (!rd.why().empty()) return invalid_argument(rd.why());
  return r;
}

// Steps a SELECT of kCandidateColumns to the end. A row read_record refuses is left out and
// described in `skipped`, or without `skipped` is the error.
Result<std::vector<CandidateRecord>> read_all(sqlite3* db, const std::string& path, sqlite3_stmt* st,
                                              std::vector<std::string>* skipped) {
  std::vector<CandidateRecord> out;
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return sqlite_error(path, db, "cannot read candidates");
    int64_t id = 0;
    std::string route;
    Result<CandidateRecord> r = read_record(st, id, route);
    if (r) {
      out.push_back(std::move(r).value());
      continue;
    }
    std::string why = describe_row(path, id, route, r.status().message());
    if (!skipped) return invalid_argument(std::move(why));
    skipped->push_back(std::move(why));
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

// The metrics column as a JSON value for the export: null when empty, the parsed value when it is
// JSON nested at most kMaxDepth deep (written again on one line), else a JSON string of the raw
// text (a row edited by hand stays readable). The depth bound keeps the writer's recursion
// bounded: nlohmann parses without recursion but writes with it.
nlohmann::ordered_json metrics_value(const std::string& text) {
  constexpr int kMaxDepth = 256;
  if (text.empty()) return nullptr;
  bool too_deep = false;
  auto depth_check = [&](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
    too_deep = too_deep || depth > kMaxDepth;
    return true;
  };
  nlohmann::ordered_json v = nlohmann::ordered_json::parse(text, depth_check, false);
  if (v.is_discarded() || too_deep) return text;
  return v;
}

// One record as one line of JSON. NaN and infinities (not JSON) are written as null.
std::string record_to_json(const CandidateRecord& r) {
  const nlohmann::ordered_json j = {{"id", r.id},
                                    {"model_hash", r.model_hash},
                                    {"device", r.device},
                                    {"tool_version", r.tool_version},
                                    {"route", r.route},
                                    {"status", r.status},
                                    {"reason", r.reason},
                                    {"strategy", r.strategy},
                                    {"seed", r.seed},
                                    {"build_ms", r.build_ms},
                                    {"metrics", metrics_value(r.metrics_json)},
                                    {"median_ms", r.median_ms},
                                    {"p10_ms", r.p10_ms},
                                    {"p90_ms", r.p90_ms},
                                    {"cv", r.cv},
                                    {"runs", r.runs},
                                    {"threads", r.threads},
                                    {"unix_time", r.unix_time},
                                    {"evaluator", r.evaluator}};
  return dump_json(j);
}

}  // namespace

Result<std::unique_ptr<Database>> Database::open(const std::string& path, Mode mode) {
  if (path.empty()) return invalid_argument("tuning database: empty path");
  const bool read_only = mode == Mode::read_only;
  // A reader names a file that must exist: SQLite would create an empty one (and a reader
  // without SQLITE_OPEN_CREATE says only "unable to open database file").
  if (read_only && path != ":memory:") {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (!fs::exists(st)) return io_error(path + ": no such tuning database");
    if (fs::is_directory(st)) return invalid_argument(path + ": is a directory, not a tuning database");
  }
  std::unique_ptr<Database> d(new Database());
  d->path_ = path;
  int rc = sqlite3_open_v2(path.c_str(), &d->db_,
                           read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) return with_directory_hint(sqlite_error(path, d->db_, "cannot open tuning database"), path);
  sqlite3* db = d->db_;
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  // SQLite silently falls back to read-only when the file is not writable.
  if (!read_only && sqlite3_db_readonly(db, "main") == 1)
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
  if (read_only) {
    if (first->kind == FileKind::fresh)
      return invalid_argument(path + ": not a Tactician tuning database: the file is empty (no tuning was recorded in it)");
    // A file of the first layout is read as it is (a reader adds nothing).
    auto has = [&](const char* sql, bool& out) -> Status {
      Statement st;
      TAC_RETURN_IF_ERROR(prepare(db, path, sql, st));
      if (sqlite3_step(st.get()) != SQLITE_ROW) return sqlite_error(path, db, "cannot read the tables");
      out = sqlite3_column_int(st.get(), 0) != 0;
      return Status::ok();
    };
    TAC_RETURN_IF_ERROR(has("SELECT count(*) FROM pragma_table_info('candidates') WHERE name = 'evaluator'", d->has_evaluator_));
    TAC_RETURN_IF_ERROR(has("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'measurements'",
                            d->has_measurements_));
    return d;
  }

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

Result<std::vector<Measurement>> Database::measurements(std::vector<std::string>* skipped) {
  if (!has_measurements_) return std::vector<Measurement>();
  Statement st;
  TAC_RETURN_IF_ERROR(prepare(db_, path_,
                              "SELECT rowid, candidate_id, kind, median_ms, cv, runs, unix_time FROM measurements "
                              "ORDER BY rowid",
                              st));
  std::vector<Measurement> out;
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    RowReader rd(st.get());
    Measurement m;
    const int64_t rowid = sqlite3_column_int64(st.get(), 0);
    m.candidate_id = rd.integer(1, "candidate_id");
    m.kind = rd.text(2, "kind");
    m.median_ms = rd.real(3, "median_ms");
    m.cv = rd.real(4, "cv");
    m.runs = static_cast<int>(rd.integer(5, "runs", INT_MIN, INT_MAX));
    m.unix_time = rd.real(6, "unix_time");
    if (rd.why().empty()) {
      out.push_back(std::move(m));
      continue;
    }
    std::string why = path_ + ": measurement row " + std::to_string(rowid) + ": " + rd.why();
    if (!skipped) return invalid_argument(std::move(why));
    skipped->push_back(std::move(why));
  }
  if (rc != SQLITE_DONE) return sqlite_error(path_, db_, "cannot read measurements");
  return out;
}

// When a route was recorded more than once (a re-measurement), the most recent record wins.
Result<std::optional<CandidateRecord>> Database::find(const std::string& model_hash, const std::string& device,
                                                      const std::string& tool_version, const std::string& route) {
  Statement st;
  const std::string sql = std::string("SELECT ") + (has_evaluator_ ? kCandidateColumns : kCandidateColumnsOld) +
                          " FROM candidates WHERE model_hash = ?1 AND device = ?2 AND tool_version = ?3 "
                          "AND route = ?4 ORDER BY id DESC LIMIT 1";
  TAC_RETURN_IF_ERROR(prepare(db_, path_, sql.c_str(), st));
  bind_text(st.get(), 1, model_hash);
  bind_text(st.get(), 2, device);
  bind_text(st.get(), 3, tool_version);
  bind_text(st.get(), 4, route);
  int rc = sqlite3_step(st.get());
  if (rc == SQLITE_DONE) return std::optional<CandidateRecord>();
  if (rc != SQLITE_ROW) return sqlite_error(path_, db_, "cannot look up candidate");
  int64_t id = 0;
  std::string stored_route;
  Result<CandidateRecord> r = read_record(st.get(), id, stored_route);
  if (!r) return invalid_argument(describe_row(path_, id, stored_route, r.status().message()));
  return std::optional<CandidateRecord>(std::move(r).value());
}

Result<std::vector<CandidateRecord>> Database::all(const std::string& model_hash, const std::string& device,
                                                   const std::string& tool_version, std::vector<std::string>* skipped) {
  Statement st;
  const std::string sql = std::string("SELECT ") + (has_evaluator_ ? kCandidateColumns : kCandidateColumnsOld) +
                          " FROM candidates WHERE model_hash = ?1 AND device = ?2 AND tool_version = ?3 ORDER BY id";
  TAC_RETURN_IF_ERROR(prepare(db_, path_, sql.c_str(), st));
  bind_text(st.get(), 1, model_hash);
  bind_text(st.get(), 2, device);
  bind_text(st.get(), 3, tool_version);
  return read_all(db_, path_, st.get(), skipped);
}

Result<std::vector<CandidateRecord>> Database::everything(std::vector<std::string>* skipped) {
  Statement st;
  const std::string sql = std::string("SELECT ") + (has_evaluator_ ? kCandidateColumns : kCandidateColumnsOld) +
                          " FROM candidates ORDER BY id";
  TAC_RETURN_IF_ERROR(prepare(db_, path_, sql.c_str(), st));
  return read_all(db_, path_, st.get(), skipped);
}

Status Database::export_jsonl(const std::string& path, std::vector<std::string>* skipped) {
  TAC_ASSIGN_OR_RETURN(std::vector<CandidateRecord> records, everything(skipped));
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

std::string describe_row(const std::string& db_path, int64_t id, const std::string& route, const std::string& why) {
  return db_path + ": row " + std::to_string(id) + " (route '" + printable(route) + "'): " + why;
}

Status validate_candidate(const CandidateRecord& r) {
  static const char* const kStatuses[] = {"ok", "rejected", "build_failed", "run_failed", "crashed", "timeout"};
  if (std::none_of(std::begin(kStatuses), std::end(kStatuses), [&](const char* s) { return r.status == s; }))
    return invalid_argument("unknown status '" + printable(r.status, 40) +
                            "' (ok, rejected, build_failed, run_failed, crashed or timeout)");
  Result<builder::Route> route = builder::Route::parse(r.route);
  if (!route) return route.status();
  if (route->to_string() != r.route)
    return invalid_argument("route is not in the canonical form the tuner writes ('" + printable(route->to_string()) + "')");
  // Times and the cv: not negative, finite, or NaN where nothing was measured (stored as NULL).
  const bool ok = r.status == "ok";
  for (const auto& [name, v] : {std::pair<const char*, double>{"build_ms", r.build_ms},
                                {"median_ms", r.median_ms},
                                {"p10_ms", r.p10_ms},
                                {"p90_ms", r.p90_ms},
                                {"cv", r.cv}}) {
    if (std::isnan(v) && !(ok && std::string(name) == "median_ms")) continue;
    if (!std::isfinite(v) || v < 0)
      return invalid_argument(std::string(name) + " is " + std::to_string(v) + " (a time or cv is finite and not negative)");
  }
  if (ok && !(r.median_ms > 0)) return invalid_argument("an ok candidate with median_ms " + std::to_string(r.median_ms));
  if (r.runs < 0 || (ok && r.runs < 1))
    return invalid_argument("runs is " + std::to_string(r.runs) + (ok ? " for an ok candidate" : ""));
  if (r.threads < 1) return invalid_argument("threads is " + std::to_string(r.threads));
  if (!std::isfinite(r.unix_time) || r.unix_time < 0)
    return invalid_argument("unix_time is " + std::to_string(r.unix_time));
  if (Result<std::vector<Metrics>> m = parse_metrics_json(r.metrics_json); !m) return m.status();
  return Status::ok();
}

std::vector<CandidateRecord> usable_candidates(std::vector<CandidateRecord> records, const std::string& db_path,
                                               std::vector<std::string>& skipped) {
  std::vector<CandidateRecord> out;
  out.reserve(records.size());
  for (CandidateRecord& r : records) {
    if (Status st = validate_candidate(r); !st.is_ok()) {
      skipped.push_back(describe_row(db_path, r.id, r.route, st.message()));
      continue;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tac::tuner
