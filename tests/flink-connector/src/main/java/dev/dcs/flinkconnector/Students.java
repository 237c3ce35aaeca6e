package dev.dcs.flinkconnector;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The seed {@code student} table (the runner's demo shape plus {@code visits BIGINT},
 * {@code ratio DOUBLE} and {@code grade CHAR(2)}), with rows that are a pure function of their id
 * and version.
 */
public final class Students {
    /** Column definitions, in table order. */
    public static final String COLUMNS =
            "id INT NOT NULL, name VARCHAR(64), age SMALLINT, score DECIMAL(8,2), "
                    + "balance DECIMAL(18,4), active BOOLEAN, birthday DATE, updated DATETIME(6), "
                    + "note STRING, visits BIGINT, ratio DOUBLE, grade CHAR(2)";

    private static final DateTimeFormatter DATETIME6 =
            DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSSSSS");
    private static final String[] NOTES = {
        null, "tab\tquote' backslash\\", "ünïcödé ✓", "plain", "comma, \"quoted\""
    };

    private Students() {}

    /** {@code CREATE TABLE} of a student table with the changelog enabled. */
    public static String createTable(String table, String keys, int buckets) {
        return "CREATE TABLE " + table + " (" + COLUMNS + ") " + keys
                + " DISTRIBUTED BY HASH(id) BUCKETS " + buckets
                + " PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\""
                + (keys.startsWith("UNIQUE") ? ", \"changelog.need_historical_value\" = \"true\"" : "")
                + ")";
    }

    /** The row of {@code id} at {@code version}, as the connector maps Doris values to Java. */
    public static List<Object> row(int id, int version) {
        long v = (id * 2_654_435_761L + version * 40_503L) & 0x7fffffffL;
        return Arrays.asList(
                id,
                v % 11 == 0 ? null : "student " + id + " v" + version,
                v % 13 == 0 ? null : (short) (18 + v % 50),
                new BigDecimal(v % 1_000_000).movePointLeft(2).stripTrailingZeros(),
                v % 7 == 0 ? null : new BigDecimal(v * 31 - 5_000_000_000L).movePointLeft(4).stripTrailingZeros(),
                v % 2 == 0,
                LocalDate.of(1990, 1, 1).plusDays(v % 9000),
                LocalDateTime.of(2026, 1, 1, 0, 0).plusSeconds(v % 10_000_000).plusNanos((v % 1_000_000) * 1000),
                NOTES[(int) (v % NOTES.length)],
                v % 17 == 0 ? null : v * 1_000_003L,
                (v % 1000) / 8.0,
                (v % 3 == 0 ? "A" : "B") + (v % 10));
    }

    /** A row as the SQL literals of a VALUES list. */
    public static String sqlValues(List<Object> row) {
        List<String> cells = new ArrayList<>();
        for (Object cell : row) {
            if (cell == null) {
                cells.add("NULL");
            } else if (cell instanceof String s) {
                cells.add("'" + s.replace("\\", "\\\\").replace("'", "\\'").replace("\t", "\\t") + "'");
            } else if (cell instanceof LocalDateTime t) {
                cells.add("'" + DATETIME6.format(t) + "'");
            } else if (cell instanceof LocalDate d) {
                cells.add("'" + d + "'");
            } else if (cell instanceof BigDecimal d) {
                cells.add(d.toPlainString());
            } else if (cell instanceof Boolean b) {
                cells.add(b ? "true" : "false");
            } else {
                cells.add(cell.toString());
            }
        }
        return "(" + String.join(", ", cells) + ")";
    }

    /** Insert rows {@code from..to} (inclusive) at {@code version}, 500 rows per INSERT. */
    public static void insert(DorisEmu emu, String table, int from, int to, int version) {
        List<String> values = new ArrayList<>();
        for (int id = from; id <= to; id++) {
            values.add(sqlValues(row(id, version)));
            if (values.size() == 500 || id == to) {
                emu.sql("information_schema", "INSERT INTO " + table + " VALUES " + String.join(", ", values));
                values.clear();
            }
        }
    }
}
