import { describe, expect, it } from "vitest";
import { redactSecrets, redactUrl } from "../src/index.js";

describe("redactUrl", () => {
  it("replaces the password of any scheme and keeps the rest", () => {
    expect(redactUrl("amqp://guest:guest@127.0.0.1:5672/vh")).toBe(
      "amqp://guest:<redacted>@127.0.0.1:5672/vh",
    );
    expect(redactUrl("redis://user:s3cret@host:6379/0")).toBe("redis://user:<redacted>@host:6379/0");
    expect(redactUrl("stomp://factflow:pw@127.0.0.1:61613")).toBe(
      "stomp://factflow:<redacted>@127.0.0.1:61613",
    );
  });

  it("leaves a URL without a password as it is", () => {
    expect(redactUrl("amqp://127.0.0.1:5672")).toBe("amqp://127.0.0.1:5672");
  });

  it("still hides credentials in a string the URL parser refuses", () => {
    expect(redactUrl("not a url://a:b@c")).not.toContain(":b@");
  });
});

describe("redactSecrets", () => {
  it("removes the URL, the raw password and its decoded form from a message", () => {
    const url = "amqp://guest:p%40ss%2Fword@127.0.0.1:5672";
    const text = `connect ${url} failed: bad password p%40ss%2Fword (p@ss/word)`;
    const out = redactSecrets(text, url);
    expect(out).not.toContain("p%40ss%2Fword");
    expect(out).not.toContain("p@ss/word");
    expect(out).toContain("amqp://guest:<redacted>@127.0.0.1:5672");
  });
});
