// How a tool path names a place in the workspace: relative paths pass
// through, an absolute path under any of the workspace's roots becomes
// relative, any other absolute path is EFORBIDDEN naming the workspace, and
// NUL bytes are EINVAL.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { toWorkspacePath } from "./paths.js";

const roots = ["/home/u/ws", "/real/ws/"];

describe("toWorkspacePath", () => {
  it("passes relative paths through unchanged", () => {
    for (const p of ["a.txt", "dir/b", "", ".", "../x"]) expect(toWorkspacePath(p, roots)).toBe(p);
  });

  it("makes absolute paths under any root relative, the root itself being ''", () => {
    expect(toWorkspacePath("/home/u/ws/src/a.ts", roots)).toBe("src/a.ts");
    expect(toWorkspacePath("/home/u/ws", roots)).toBe("");
    expect(toWorkspacePath("/real/ws/x", roots)).toBe("x");
    expect(toWorkspacePath("/real/ws", roots)).toBe("");
  });

  it("refuses other absolute paths, including a sibling that shares the root's prefix", () => {
    for (const p of ["/tmp/x", "/home/u/wsx/a", "/home/u", "/"]) {
      expect(() => toWorkspacePath(p, roots)).toThrow(
        expect.objectContaining({
          code: "EFORBIDDEN",
          message: expect.stringContaining("/home/u/ws"),
        }),
      );
    }
  });

  it("refuses NUL bytes with EINVAL", () => {
    expect(() => toWorkspacePath("a\0b", roots)).toThrow(
      expect.objectContaining({ code: "EINVAL" }),
    );
    expect(() => toWorkspacePath("/home/u/ws/\0", roots)).toThrow(
      expect.objectContaining({ code: "EINVAL" }),
    );
  });

  it("maps root + '/' + rel back to rel (property)", () => {
    const segment = fc.stringMatching(/^[A-Za-z0-9._-]{1,8}$/);
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 4 }), (parts) => {
        const rel = parts.join("/");
        expect(toWorkspacePath(`/home/u/ws/${rel}`, roots)).toBe(rel);
      }),
    );
  });
});
