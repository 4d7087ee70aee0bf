"""What happened in a trace: its timeline, steps, graphs, phases, memory, ranks, collectives, idle time by cause and the checks on its integrity. Facts import nothing from the layers above."""
