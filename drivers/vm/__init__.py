"""Parts of a VM driver that no cloud owns: choosing the cheapest fitting instance type from a
price catalog (`choice`) and the first-boot user-data that arms the lifetime and runs the
entry (`userdata`). The aws driver uses them; the GCP and Azure drivers will too."""
