import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

/**
 * A real Apache Curator participant driven over stdin/stdout, for tenure's interop tests and
 * its benchmarks (test/peers/curator.ts starts it; one driver for both).
 *
 * argv: connectString sessionTimeoutMs. Prints {"ready":true} once connected. Then reads one
 * command a line, "<id> <command> <args…>", runs it on the thread of its handle (Curator's
 * InterProcessMutex is owned by a thread: acquire and release must run on the same one), and
 * prints one JSON line {"id":…, …} per command. Times are System.nanoTime(), CLOCK_MONOTONIC
 * on Linux, the clock Node's process.hrtime.bigint() reads: stamps compare across processes.
 */
public final class CuratorPeer {
  private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
  private static String connectString;
  private static int sessionTimeoutMs;
  private static CuratorFramework client;
  private static final Map<String, ExecutorService> threads = new ConcurrentHashMap<>();
  private static final Map<String, InterProcessMutex> mutexes = new ConcurrentHashMap<>();
  private static final Map<String, LeaderLatch> latches = new ConcurrentHashMap<>();

  public static void main(String[] args) throws Exception {
    connectString = args[0];
    sessionTimeoutMs = Integer.parseInt(args[1]);
    client = newClient();
    OUT.println("{\"ready\":true,\"sessionId\":\"" + Long.toHexString(client.getZookeeperClient().getZooKeeper().getSessionId()) + "\"}");
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      String[] w = line.trim().split(" ");
      if (w.length < 2) continue;
      String id = w[0];
      String handle = w.length > 2 ? w[2] : "-";
      threads.computeIfAbsent(handle, h -> Executors.newSingleThreadExecutor()).submit(() -> {
        try {
          reply(id, run(w[1], Arrays.copyOfRange(w, 2, w.length)));
        } catch (Throwable e) {
          reply(id, "\"error\":" + str(e.toString()));
        }
      });
    }
    // stdin closed: the owner is gone. Exit without closing anything, like a crash would.
    Runtime.getRuntime().halt(0);
  }

  private static CuratorFramework newClient() throws InterruptedException {
    CuratorFramework c = CuratorFrameworkFactory.newClient(connectString, sessionTimeoutMs, 15_000, new ExponentialBackoffRetry(100, 3));
    c.start();
    if (!c.blockUntilConnected(15, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connectString);
    return c;
  }

  private static synchronized void reply(String id, String body) {
    OUT.println("{\"id\":" + id + (body.isEmpty() ? "" : "," + body) + "}");
  }

  private static String run(String cmd, String[] a) throws Exception {
    switch (cmd) {
      // ── interactive participants (tests) ──
      case "mutex.acquire": { // handle path timeoutMs
        InterProcessMutex m = mutexes.computeIfAbsent(a[0], h -> new InterProcessMutex(client, a[1]));
        boolean got = m.acquire(Long.parseLong(a[2]), TimeUnit.MILLISECONDS);
        return "\"acquired\":" + got + ",\"t\":\"" + System.nanoTime() + "\"";
      }
      case "mutex.release": { // handle
        long t = System.nanoTime();
        mutexes.get(a[0]).release();
        return "\"t\":\"" + t + "\"";
      }
      case "mutex.loop": // handle path iterations sentinelPath holdMs
        return mutexLoop(mutexes.computeIfAbsent(a[0], h -> new InterProcessMutex(client, a[1])), Integer.parseInt(a[2]), a[3], Long.parseLong(a[4]));
      case "latch.start": { // handle path participantId
        LeaderLatch l = new LeaderLatch(client, a[1], a[2]);
        latches.put(a[0], l);
        l.start();
        return "";
      }
      case "latch.await": { // handle timeoutMs
        boolean leader = latches.get(a[0]).await(Long.parseLong(a[1]), TimeUnit.MILLISECONDS);
        return "\"leader\":" + leader + ",\"t\":\"" + System.nanoTime() + "\"";
      }
      case "latch.leader": { // handle
        Participant p = latches.get(a[0]).getLeader();
        return "\"leaderId\":" + str(p.getId()) + ",\"isLeader\":" + latches.get(a[0]).hasLeadership();
      }
      case "latch.close": { // handle
        long t = System.nanoTime();
        latches.remove(a[0]).close();
        return "\"t\":\"" + t + "\"";
      }
      // ── measurements (bench): the loops run here so no IPC is timed ──
      case "bench.uncontended": // handle path durationMs
        return uncontended(a[1], Long.parseLong(a[2]));
      case "bench.contended": // handle path contenders durationMs
        return contended(a[1], Integer.parseInt(a[2]), Long.parseLong(a[3]));
      case "bench.handoff": // handle path durationMs
        return handoff(a[1], Long.parseLong(a[2]));
      default:
        throw new IllegalArgumentException("unknown command " + cmd);
    }
  }

  /**
   * acquire → create the sentinel znode (fails if another holder has it: exclusion broken) →
   * hold → delete it → release, `n` times. Returns the violations and every hold interval.
   */
  private static String mutexLoop(InterProcessMutex m, int n, String sentinel, long holdMs) throws Exception {
    int violations = 0;
    StringBuilder spans = new StringBuilder();
    for (int i = 0; i < n; i++) {
      m.acquire();
      long start = System.nanoTime();
      boolean mine = true;
      try {
        client.create().withMode(CreateMode.EPHEMERAL).forPath(sentinel);
      } catch (KeeperException.NodeExistsException e) {
        violations++;
        mine = false;
      }
      if (holdMs > 0) Thread.sleep(holdMs);
      if (mine) client.delete().forPath(sentinel);
      long end = System.nanoTime();
      m.release();
      spans.append(spans.length() == 0 ? "" : ",").append("[\"").append(start).append("\",\"").append(end).append("\"]");
    }
    return "\"violations\":" + violations + ",\"spans\":[" + spans + "]";
  }

  private static String uncontended(String path, long durationMs) throws Exception {
    InterProcessMutex m = new InterProcessMutex(client, path);
    List<Long> lat = new ArrayList<>();
    long start = System.nanoTime(), end = start + durationMs * 1_000_000L;
    while (System.nanoTime() < end) {
      long t = System.nanoTime();
      m.acquire();
      m.release();
      lat.add(System.nanoTime() - t);
    }
    return stats(lat, System.nanoTime() - start) + ",\"count\":" + lat.size();
  }

  /** n contenders, each on its own CuratorFramework (own session) and thread, cycling acquire → release. */
  private static String contended(String path, int n, long durationMs) throws Exception {
    List<CuratorFramework> clients = new ArrayList<>();
    for (int i = 0; i < n; i++) clients.add(newClient());
    ExecutorService pool = Executors.newFixedThreadPool(n);
    List<Long> waits = java.util.Collections.synchronizedList(new ArrayList<>());
    long[] counts = new long[n];
    CountDownLatch go = new CountDownLatch(1);
    AtomicLong endAt = new AtomicLong();
    List<Future<?>> fs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      final int k = i;
      final InterProcessMutex m = new InterProcessMutex(clients.get(i), path);
      fs.add(pool.submit(() -> {
        go.await();
        while (System.nanoTime() < endAt.get()) {
          long t = System.nanoTime();
          m.acquire();
          waits.add(System.nanoTime() - t);
          counts[k]++;
          m.release();
        }
        return null;
      }));
    }
    long start = System.nanoTime();
    endAt.set(start + durationMs * 1_000_000L);
    go.countDown();
    for (Future<?> f : fs) f.get();
    long elapsed = System.nanoTime() - start;
    pool.shutdown();
    for (CuratorFramework c : clients) c.close();
    long min = Long.MAX_VALUE, max = 0;
    for (long c : counts) { min = Math.min(min, c); max = Math.max(max, c); }
    return stats(new ArrayList<>(waits), elapsed) + ",\"min\":" + min + ",\"max\":" + max;
  }

  /**
   * Two sessions alternate: one holds, the other is already waiting; time from the start of the
   * holder's release to the waiter's grant (the same protocol as tenure's hand-off bench).
   */
  private static String handoff(String path, long durationMs) throws Exception {
    CuratorFramework[] cs = { newClient(), newClient() };
    InterProcessMutex[] ms = { new InterProcessMutex(cs[0], path), new InterProcessMutex(cs[1], path) };
    ExecutorService[] ts = { Executors.newSingleThreadExecutor(), Executors.newSingleThreadExecutor() };
    List<Long> lat = new ArrayList<>();
    long end = System.nanoTime() + durationMs * 1_000_000L;
    int holder = 0;
    ts[holder].submit(() -> { ms[0].acquire(); return null; }).get();
    while (System.nanoTime() < end || lat.size() < 5) {
      final int h = holder, w = 1 - holder;
      Future<Long> granted = ts[w].submit(() -> { ms[w].acquire(); return System.nanoTime(); });
      Thread.sleep(2); // the waiter's node and watch are in place
      long t0 = System.nanoTime();
      ts[h].submit(() -> { ms[h].release(); return null; }).get();
      lat.add(granted.get() - t0);
      holder = w;
    }
    final int h = holder;
    ts[h].submit(() -> { ms[h].release(); return null; }).get();
    for (ExecutorService t : ts) t.shutdown();
    for (CuratorFramework c : cs) c.close();
    return stats(lat, 0) + ",\"count\":" + lat.size();
  }

  /** ops/s over `elapsedNs` (when > 0) and p50/p99 of the sample, in ms. */
  private static String stats(List<Long> ns, long elapsedNs) {
    long[] s = ns.stream().mapToLong(Long::longValue).sorted().toArray();
    return (elapsedNs > 0 ? "\"opsPerSec\":" + (s.length / (elapsedNs / 1e9)) + "," : "") + "\"p50Ms\":" + pct(s, 50) + ",\"p99Ms\":" + pct(s, 99);
  }

  /** The same percentile rule as bench/harness.ts. */
  private static double pct(long[] s, double p) {
    if (s.length == 0) return Double.NaN;
    int i = (int) Math.min(s.length - 1, Math.max(0, Math.ceil(p / 100 * s.length) - 1));
    return s[i] / 1e6;
  }

  private static String str(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }
}
