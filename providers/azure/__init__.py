"""The `azure` catalog fetcher: VM sizes and hourly prices from the Azure Retail Prices API,
shapes from the Resource SKUs API when an Azure token is given."""
