/**
 * The last lines a process wrote, for FallbackToLogsOnError messages. The
 * kubelet keeps at most 80 lines and 2048 bytes of them; so does this.
 */
export const TAIL_LINES = 80;
export const TAIL_BYTES = 2048;

export class LogTail {
  private lines: string[] = [];
  private partial = "";

  push(chunk: string): void {
    const parts = (this.partial + chunk).split("\n");
    this.partial = parts.pop() ?? "";
    this.lines.push(...parts);
    if (this.lines.length > TAIL_LINES) this.lines.splice(0, this.lines.length - TAIL_LINES);
  }

  text(): string {
    const all = [...this.lines, ...(this.partial ? [this.partial] : [])].join("\n").trimEnd();
    return all.length > TAIL_BYTES ? all.slice(all.length - TAIL_BYTES) : all;
  }
}
