"""Models over the kernel frame: device ceilings, roofline placement, occupancy. No plotting here."""
