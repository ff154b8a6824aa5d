// Public entry of `agent-computer/aui`: the A@UI protocol (WIRE.md §3).
export {};
