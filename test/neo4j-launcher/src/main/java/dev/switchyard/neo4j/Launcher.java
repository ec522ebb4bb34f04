package dev.switchyard.neo4j;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.BoltConnectorInternalSettings;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.QueryExecutionException;
import org.neo4j.io.ByteUnit;

/**
 * Neo4j Community embedded, reachable over Bolt on 127.0.0.1 only, for Switchyard's tests.
 *
 * <p>Usage: {@code Launcher <dir> <port> <password>}. The store lives under {@code dir}; starting again on the
 * same dir keeps the data (the outage test stops and restarts it). Auth is on, with user {@code neo4j} and the
 * given password, so the engine's credential checks are exercised. Prints {@code READY <uri>} once Bolt
 * accepts connections and shuts the database down cleanly on SIGTERM.
 */
public final class Launcher {
  private Launcher() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: Launcher <dir> <port> <password>");
      System.exit(64);
    }
    Path dir = Path.of(args[0]).toAbsolutePath();
    int port = Integer.parseInt(args[1]);
    String password = args[2];
    Files.createDirectories(dir);

    long t0 = System.nanoTime();
    DatabaseManagementService dbms =
        new DatabaseManagementServiceBuilder(dir)
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
            .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
            .setConfig(BoltConnectorInternalSettings.enable_local_connector, false)
            // Netty's graceful shutdown otherwise waits 2 × 5 s for connections that are already gone.
            .setConfig(BoltConnectorInternalSettings.thread_pool_shutdown_wait_time, Duration.ofMillis(200))
            .setConfig(BoltConnectorInternalSettings.connection_shutdown_wait_time, Duration.ofMillis(200))
            .setConfig(HttpConnector.enabled, false)
            .setConfig(GraphDatabaseSettings.auth_enabled, true)
            // Small and quick for tests; the bench asks for more (-Dswitchyard.pagecacheMiB).
            .setConfig(
                GraphDatabaseSettings.pagecache_memory,
                ByteUnit.mebiBytes(Long.getLong("switchyard.pagecacheMiB", 128L)))
            .setConfig(GraphDatabaseSettings.keep_logical_logs, "2 files")
            .setConfig(GraphDatabaseSettings.shutdown_transaction_end_timeout, Duration.ofSeconds(2))
            .build();

    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  dbms.shutdown();
                  stopped.countDown();
                },
                "neo4j-shutdown"));

    // Embedded transactions run with full rights, so the password can be set without the initial-password
    // dance. On a restart it is usually set already, which Neo4j reports as an error.
    GraphDatabaseService system = dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
    try {
      system.executeTransactionally(
          "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED", Map.of("password", password));
    } catch (QueryExecutionException e) {
      if (!e.getMessage().contains("cannot be the same")) throw e;
    }

    long ms = (System.nanoTime() - t0) / 1_000_000;
    System.out.println("READY bolt://127.0.0.1:" + port + " (" + ms + " ms)");
    System.out.flush();
    stopped.await();
  }
}
