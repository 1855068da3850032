/** How the website names one of its user's connections: by its Item's id, or by its access token. */
export type ConnectionReference = { itemId: string } | { accessToken: string };
