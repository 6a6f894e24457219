package dev.detour.rmqdriver;

import java.util.HashMap;
import java.util.Map;

/** What the gRPC drivers read and print: key=value arguments, JSON strings, failures. */
final class Text {
  private Text() {}

  /** Is the drivers' key=value arguments as a map, failing on any other shape. */
  static Map<String, String> arguments(String[] argv) {
    Map<String, String> a = new HashMap<>();
    for (String s : argv) {
      int eq = s.indexOf('=');
      if (eq < 0) {
        throw new IllegalArgumentException("argument " + s + " is not key=value");
      }
      a.put(s.substring(0, eq), s.substring(eq + 1));
    }
    return a;
  }

  /** Names an exception and its causes, at most about 2,000 characters of them. */
  static String describe(Throwable e) {
    StringBuilder s = new StringBuilder();
    for (Throwable c = e; c != null && s.length() < 2000; c = c.getCause()) {
      if (s.length() > 0) {
        s.append(" <- ");
      }
      s.append(c.getClass().getName()).append(": ").append(c.getMessage());
      if (c.getCause() == c) {
        break;
      }
    }
    return s.toString();
  }

  /** Is s as a JSON string: quotes, backslashes and control characters escaped. */
  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }
}
