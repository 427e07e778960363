"""The `azure` catalog fetcher: VM sizes and hourly prices from the Azure Retail Prices API,
shapes from the Resource SKUs API when an Azure token is given, else from shoal's built-in
table of Microsoft's published sizes."""
