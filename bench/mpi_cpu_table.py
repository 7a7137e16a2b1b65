# Table of bench/mpi_cpu_rounds.sh runs: python3 bench/mpi_cpu_table.py OUT_DIR BUDGET_S
import json, sqlite3, sys, glob, os, statistics
D = sys.argv[1]
rows = []
for out in sorted(glob.glob(D + "/*.out")):
    tag = os.path.basename(out)[:-4]
    try:
        s = json.loads(open(out).read().strip().splitlines()[-1])
    except Exception as e:
        print(tag, "no summary", e); continue
    db = sqlite3.connect(out[:-4] + ".db")
    m = dict(db.execute("select kind, count(*) from measurements group by kind").fetchall())
    t0, t1 = db.execute("select min(unix_time), max(unix_time) from candidates").fetchone()
    runs = s["candidates"] + m.get("rung1", 0) + m.get("accept", 0) + m.get("incumbent", 0)
    rows.append((tag, s["candidates"], m.get("rung1", 0), m.get("accept", 0), runs, s["default_ms"], s["best_ms"], s["speedup"], s["wall_s"], s["candidates_by_rank"]))
print("| run | candidates | rung-1 re-measurements | acceptance tests | child evaluations | candidates/min (budget) | default ms | best ms | speed-up | wall s | per rank |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
budget = float(sys.argv[2])
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]//2} | {r[4]} | {r[1]*60/budget:.0f} | {r[5]:.3f} | {r[6]:.3f} | {r[7]:.3f} | {r[8]:.0f} | {r[9]} |")
